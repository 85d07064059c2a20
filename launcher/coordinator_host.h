#ifndef HMC_LAUNCHER_COORDINATOR_HOST_H_
#define HMC_LAUNCHER_COORDINATOR_HOST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/coordinator.h"
#include "core/socket.h"
#include "launcher/process.h"
#include "launcher/rank_command.h"

namespace hmc {

// Where the coordinator of a group listens, so that every rank reaches it:
// - `bind` given: there (and ranks are told that address);
// - ranks in network namespaces (all of them must be): inside the first rank's namespace on its
//   address;
// - ssh ranks on other machines: on every interface, announced as the local address that routes
//   to the first of them;
// - otherwise on 127.0.0.1.
// Any port unless `bind` names one.
struct CoordinatorPlacement {
  std::string bind;
  std::string netns;          // Empty: this process's namespace.
  std::string announce_host;  // Empty: the address it listens on.
};
absl::StatusOr<CoordinatorPlacement> PlaceCoordinator(const std::vector<RankPlacement>& ranks,
                                                      const std::string& bind);

// What ranks connect to: the address listened on, or `announce_host` with its port.
std::string AnnouncedAddress(const CoordinatorPlacement& placement, const SocketAddress& address);

struct HostedCoordinator {
  std::unique_ptr<Coordinator> coordinator;
  std::string address;  // What the ranks connect to.
};

// Starts a coordinator whose listening socket lives in the network namespace `netns` (as `ip
// netns` names it; needs root), served from this process: a socket stays in the namespace it was
// created in.
absl::StatusOr<std::unique_ptr<Coordinator>> StartCoordinatorInNamespace(
    const std::string& netns, const CoordinatorConfig& config);

// Starts the coordinator in this process, placed as PlaceCoordinator says.
absl::StatusOr<HostedCoordinator> HostCoordinator(const std::vector<RankPlacement>& ranks,
                                                  CoordinatorConfig config,
                                                  const std::string& bind);

// The coordinator as a child process (`program`: hmc-coordinator), placed as PlaceCoordinator
// says, that hmcrun restarts when it dies: `restart` starts it again at the address it took.
struct CoordinatorProcess {
  Process process;
  RankCommand restart;
  std::string address;  // What the ranks connect to.
};
absl::StatusOr<CoordinatorProcess> StartCoordinatorProcess(const std::string& program,
                                                           const CoordinatorPlacement& placement,
                                                           const CoordinatorConfig& config);

}  // namespace hmc

#endif  // HMC_LAUNCHER_COORDINATOR_HOST_H_
