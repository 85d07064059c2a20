#include "launcher/coordinator_host.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/socket.h"

namespace hmc {

absl::StatusOr<std::unique_ptr<Coordinator>> StartCoordinatorInNamespace(
    const std::string& netns, const CoordinatorConfig& config) {
  UniqueFd home(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  UniqueFd target(open(absl::StrCat("/run/netns/", netns).c_str(), O_RDONLY | O_CLOEXEC));
  if (!home.valid() || !target.valid()) {
    return absl::NotFoundError(
        absl::StrFormat("network namespace %s: %s (is the emulator up? `ip netns list`)", netns,
                        std::strerror(errno)));
  }
  if (setns(target.get(), CLONE_NEWNET) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "cannot enter network namespace %s: %s (needs root)", netns, std::strerror(errno)));
  }
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(config);
  if (setns(home.get(), CLONE_NEWNET) != 0) {
    return absl::InternalError(
        absl::StrFormat("cannot return to this process's network "
                        "namespace: %s",
                        std::strerror(errno)));
  }
  return coordinator;
}

absl::StatusOr<HostedCoordinator> HostCoordinator(const std::vector<RankPlacement>& ranks,
                                                  CoordinatorConfig config,
                                                  const std::string& bind) {
  const InventoryHost* netns_host = nullptr;
  const InventoryHost* other_host = nullptr;
  const InventoryHost* remote_host = nullptr;
  for (const RankPlacement& p : ranks) {
    const InventoryHost& h = *p.host;
    if (h.connection == Connection::kNetns) {
      if (netns_host == nullptr) netns_host = &h;
    } else if (other_host == nullptr) {
      other_host = &h;
    }
    if (h.connection == Connection::kSsh && remote_host == nullptr &&
        !absl::StartsWith(h.address, "127.") && h.address != "localhost" && h.address != "::1") {
      remote_host = &h;
    }
  }
  if (netns_host != nullptr && other_host != nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host %s (%s) runs in network namespace %s and host %s (%s) does not: one coordinator "
        "cannot serve both",
        netns_host->name, netns_host->where, netns_host->netns, other_host->name,
        other_host->where));
  }
  HostedCoordinator hosted;
  std::string announce_host;
  if (!bind.empty()) {
    config.bind = bind;
  } else if (netns_host != nullptr) {
    config.bind = absl::StrCat(netns_host->address, ":0");
  } else if (remote_host != nullptr) {
    absl::StatusOr<SocketAddress> remote =
        SocketAddress::Parse(absl::StrCat(remote_host->address, ":22"));
    if (!remote.ok()) return remote.status();
    absl::StatusOr<SocketAddress> local = LocalAddressTowards(*remote);
    if (!local.ok()) return local.status();
    config.bind = local->family() == AF_INET6 ? "[::]:0" : "0.0.0.0:0";
    announce_host = local->host();
  } else {
    config.bind = "127.0.0.1:0";
  }
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator =
      netns_host != nullptr && bind.empty() ? StartCoordinatorInNamespace(netns_host->netns, config)
                                            : Coordinator::Start(config);
  if (!coordinator.ok()) return coordinator.status();
  hosted.coordinator = std::move(*coordinator);
  SocketAddress address = hosted.coordinator->address();
  hosted.address = announce_host.empty()
                       ? address.ToString()
                       : (absl::StrContains(announce_host, ':')
                              ? absl::StrFormat("[%s]:%d", announce_host, address.port())
                              : absl::StrFormat("%s:%d", announce_host, address.port()));
  return hosted;
}

}  // namespace hmc
