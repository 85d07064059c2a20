// A site whose links silently drop everything, detected on the data links alone. Two network
// namespaces joined by a veth pair, created and deleted by this test (root; skipped without it):
// the coordinator and ranks 0 and 1 in one, ranks 2 and 3 in the other. Mid-run, both ends of the
// veth start dropping every packet (a pfifo queue of length 0): nothing is reset or refused. The
// coordinator's heartbeat timeout is two minutes, so only the data links can notice within the
// test: their unacknowledged data (TCP_USER_TIMEOUT, the ranks' 2 s heartbeat_timeout) fails
// them, the ranks report it, and ranks 0 and 1 finish every round between themselves; the cut-off
// ranks end with an error, not a hang.
#include <gtest/gtest.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "perf/fault/fault_trial.h"
#include "tests/fault/expect_clean_trial.h"
#include "tests/testing/two_namespaces.h"

namespace hmc::fault {
namespace {

class LinkCutTest : public testing_util::TwoNamespaces {
 protected:
  LinkCutTest() : TwoNamespaces("10.231.78", "c") {}
};

TEST_F(LinkCutTest, RanksBeyondASilentLinkAreDroppedByTheDataLinks) {
  TrialSpec spec;
  spec.rank_binary = HMC_FAULT_RANK_PATH;
  spec.work_dir = testing::TempDir();
  spec.fault = FaultKind::kCut;
  // Enough rounds that the cut (two `tc` commands, tens of milliseconds) lands before the last:
  // on an idle machine 12 rounds could all commit first, leaving nothing to recover.
  spec.rounds = 40;
  spec.count = 1 << 18;
  spec.pause = absl::Milliseconds(5);
  spec.heartbeat_timeout = absl::Seconds(2);  // The data links' liveness timeout.
  spec.coordinator_heartbeat_timeout = absl::Minutes(2);
  spec.coordinator_bind = "10.231.78.1:0";
  spec.coordinator_netns = a_;
  spec.limit = absl::Seconds(100);
  spec.rank_prefix = [&](int rank) {
    return std::vector<std::string>{"ip", "netns", "exec", rank < 2 ? a_ : b_};
  };
  spec.cut_off = {2, 3};
  spec.cut = [&] {
    for (const auto& [ns, dev] : {std::pair{a_, va_}, std::pair{b_, vb_}}) {
      EXPECT_EQ(Run({"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "pfifo",
                     "limit", "0"}),
                0);
    }
  };
  std::optional<TrialResult> r = ExpectCleanTrial(spec);
  // Detected by the data links' 2 s timeout, far inside the coordinator's two minutes.
  if (r.has_value()) {
    EXPECT_LT(r->recovery, absl::Seconds(60));
    std::printf("recovery after the cut: %.2f s\n", absl::ToDoubleSeconds(r->recovery));
  }
}

}  // namespace
}  // namespace hmc::fault
