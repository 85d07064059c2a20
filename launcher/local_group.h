#ifndef HMC_LAUNCHER_LOCAL_GROUP_H_
#define HMC_LAUNCHER_LOCAL_GROUP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/options.h"

namespace hmc {

struct LocalGroupSpec {
  std::vector<std::string> argv;  // The program every rank runs.
  int ranks = 1;
  Options options;  // Passed to every rank as HMC_* variables.
  // Zone of each rank (cycled); empty: everyone in options.zone.
  std::vector<std::string> zones;
  absl::Duration timeout = absl::Minutes(10);
  std::string coordinator_bind = "127.0.0.1:0";
};

// Runs `ranks` local processes of one program as a group: hosts a coordinator with a fresh random
// token, starts every rank with HMC_COORDINATOR, HMC_TOKEN, HMC_RANK, HMC_WORLD_SIZE and HMC_ZONE
// set, and waits. When a rank fails, the others are stopped (SIGTERM, then SIGKILL). Returns 0 when
// every rank succeeded, else the first failing rank's exit code; an error if it could not start
// or ran past the timeout (then every rank is killed).
absl::StatusOr<int> RunLocalGroup(const LocalGroupSpec& spec);

// 32 random bytes as hex, for tokens.
std::string RandomToken();

}  // namespace hmc

#endif  // HMC_LAUNCHER_LOCAL_GROUP_H_
