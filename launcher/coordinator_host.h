#ifndef HMC_LAUNCHER_COORDINATOR_HOST_H_
#define HMC_LAUNCHER_COORDINATOR_HOST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/coordinator.h"
#include "launcher/rank_command.h"

namespace hmc {

struct HostedCoordinator {
  std::unique_ptr<Coordinator> coordinator;
  std::string address;  // What the ranks connect to.
};

// Starts the coordinator where every rank can reach it:
// - `bind` given: there (and ranks are told that address);
// - ranks in network namespaces (all of them must be): listening inside the first rank's
//   namespace on its address — a socket stays in the namespace it was created in, so this
//   process serves it from outside;
// - ssh ranks on other machines: on every interface, announced as the local address that routes
//   to the first of them;
// - otherwise on 127.0.0.1.
// Any port. `config.bind` is filled in here.
// Starts a coordinator whose listening socket lives in the network namespace `netns` (as `ip
// netns` names it; needs root), served from this process.
absl::StatusOr<std::unique_ptr<Coordinator>> StartCoordinatorInNamespace(
    const std::string& netns, const CoordinatorConfig& config);

absl::StatusOr<HostedCoordinator> HostCoordinator(const std::vector<RankPlacement>& ranks,
                                                  CoordinatorConfig config,
                                                  const std::string& bind);

}  // namespace hmc

#endif  // HMC_LAUNCHER_COORDINATOR_HOST_H_
