#ifndef HMC_TESTS_FAULT_EXPECT_CLEAN_TRIAL_H_
#define HMC_TESTS_FAULT_EXPECT_CLEAN_TRIAL_H_

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "absl/strings/str_join.h"
#include "perf/fault/fault_trial.h"

namespace hmc::fault {

// Runs one trial and expects no hang, no rank the fault did not hit to fail, no inconsistent or
// lost round, every round committed by every survivor, and (with a fault) a round committed after
// it. The result, when it ran.
inline std::optional<TrialResult> ExpectCleanTrial(const TrialSpec& spec) {
  absl::StatusOr<TrialResult> r = RunTrial(spec);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return std::nullopt;
  const std::string problems = absl::StrJoin(r->problems, "\n");
  EXPECT_FALSE(r->hang) << problems;
  EXPECT_EQ(r->failed, 0) << problems;
  EXPECT_FALSE(r->too_late) << "the fault came after the last round: more rounds";
  EXPECT_EQ(r->inconsistent, 0) << problems;
  EXPECT_EQ(r->lost, 0) << problems;
  EXPECT_EQ(r->rounds, spec.rounds) << problems;
  if (spec.fault != FaultKind::kNone) {
    EXPECT_LT(r->recovery, absl::InfiniteDuration()) << "no round committed after the fault";
  }
  return *r;
}

}  // namespace hmc::fault

#endif  // HMC_TESTS_FAULT_EXPECT_CLEAN_TRIAL_H_
