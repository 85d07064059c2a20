#ifndef HMC_LAUNCHER_GROUP_RUNNER_H_
#define HMC_LAUNCHER_GROUP_RUNNER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "launcher/process.h"
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
  // hmcrun --restart=on-failure: a rank that fails (a non-zero status or a signal) is started
  // again with the same command, at most max_restarts times, and all ranks together at most
  // max_total_restarts times; not once a rank has finished with 0 (the job is ending).
  bool restart_on_failure = false;
  int max_restarts = 3;
  int max_total_restarts = 0;  // 0: max_restarts times the ranks.
  // With restarts: a rank that cannot be restarted again leaves the others running while at
  // least this many run (hmcrun -np MIN:MAX); 0: it stops the group, as without restarts.
  int min_running = 0;
};

// A process that serves the ranks and outlives none of them (hmcrun's coordinator), already
// running. Whenever it fails (a non-zero status or a signal) while ranks still run, it is
// started again with `restart`, at most
// GroupRunSettings::max_restarts times (with restart_on_failure); once no rank runs it gets
// SIGTERM, then SIGKILL after the grace period. Its output is this process's.
struct ServiceProcess {
  std::string name;  // For messages: "the coordinator".
  Process process;
  RankCommand restart;
};

// Starts every rank and waits. Each output line of a labelled rank is written whole to stdout
// with its label. When a rank fails and is not restarted (GroupRunSettings), the others get
// SIGTERM (ssh ranks: their session closes), then SIGKILL after the grace period. SIGINT and
// SIGTERM to this process are forwarded to every rank the same way (a second one kills). Returns 0
// when every rank succeeded (or, with min_running, every rank that was not given up on), the first
// failing rank's exit status, or 128+signal when interrupted; an error when a rank could not start
// or the group ran past the timeout (every rank is then killed).
absl::StatusOr<int> RunRanks(std::vector<RankProcess> ranks, const GroupRunSettings& settings,
                             std::optional<ServiceProcess> service = std::nullopt);

}  // namespace hmc

#endif  // HMC_LAUNCHER_GROUP_RUNNER_H_
