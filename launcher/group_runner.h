#ifndef HMC_LAUNCHER_GROUP_RUNNER_H_
#define HMC_LAUNCHER_GROUP_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "launcher/rank_command.h"

namespace hmc {

struct RankProcess {
  RankCommand command;
  // Prefix of each output line, e.g. "[3 eu eu-1]"; empty: the rank writes straight to our
  // stdout and stderr.
  std::string label;
  std::string name;  // For messages: "rank 3 (eu-1)".
};

struct GroupRunSettings {
  absl::Duration timeout = absl::Hours(24);
  absl::Duration grace = absl::Seconds(5);  // SIGTERM to SIGKILL.
};

// Starts every rank and waits. Each output line of a labelled rank is written whole to stdout
// with its label. When a rank fails, the others get SIGTERM (ssh ranks: their session closes),
// then SIGKILL after the grace period. SIGINT and SIGTERM to this process are forwarded to every
// rank the same way (a second one kills). Returns 0 when every rank succeeded, the first failing
// rank's exit status, or 128+signal when interrupted; an error when a rank could not start or
// the group ran past the timeout (every rank is then killed).
absl::StatusOr<int> RunRanks(std::vector<RankProcess> ranks, const GroupRunSettings& settings);

}  // namespace hmc

#endif  // HMC_LAUNCHER_GROUP_RUNNER_H_
