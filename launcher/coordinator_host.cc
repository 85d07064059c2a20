#include "launcher/coordinator_host.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
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

absl::StatusOr<CoordinatorPlacement> PlaceCoordinator(const std::vector<RankPlacement>& ranks,
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
  CoordinatorPlacement placement;
  if (!bind.empty()) {
    placement.bind = bind;
  } else if (netns_host != nullptr) {
    placement.bind = absl::StrCat(netns_host->address, ":0");
    placement.netns = netns_host->netns;
  } else if (remote_host != nullptr) {
    absl::StatusOr<SocketAddress> remote =
        SocketAddress::Parse(absl::StrCat(remote_host->address, ":22"));
    if (!remote.ok()) return remote.status();
    absl::StatusOr<SocketAddress> local = LocalAddressTowards(*remote);
    if (!local.ok()) return local.status();
    // Only the interface that reaches the ranks, never every interface of this machine.
    placement.announce_host = local->host();
    placement.bind = local->family() == AF_INET6 ? absl::StrFormat("[%s]:0", local->host())
                                                 : absl::StrFormat("%s:0", local->host());
  } else {
    placement.bind = "127.0.0.1:0";
  }
  return placement;
}

std::string AnnouncedAddress(const CoordinatorPlacement& placement, const SocketAddress& address) {
  if (placement.announce_host.empty()) return address.ToString();
  return absl::StrContains(placement.announce_host, ':')
             ? absl::StrFormat("[%s]:%d", placement.announce_host, address.port())
             : absl::StrFormat("%s:%d", placement.announce_host, address.port());
}

absl::StatusOr<HostedCoordinator> HostCoordinator(const std::vector<RankPlacement>& ranks,
                                                  CoordinatorConfig config,
                                                  const std::string& bind) {
  absl::StatusOr<CoordinatorPlacement> placement = PlaceCoordinator(ranks, bind);
  if (!placement.ok()) return placement.status();
  config.bind = placement->bind;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator =
      placement->netns.empty() ? Coordinator::Start(config)
                               : StartCoordinatorInNamespace(placement->netns, config);
  if (!coordinator.ok()) return coordinator.status();
  HostedCoordinator hosted;
  hosted.address = AnnouncedAddress(*placement, (*coordinator)->address());
  hosted.coordinator = std::move(*coordinator);
  return hosted;
}

namespace {

RankCommand CoordinatorCommand(const std::string& program, const CoordinatorPlacement& placement,
                               const CoordinatorConfig& config, const std::string& bind,
                               const std::string& address_file) {
  RankCommand command;
  if (!placement.netns.empty()) command.argv = {"ip", "netns", "exec", placement.netns};
  command.argv.insert(
      command.argv.end(),
      {program, "--bind=" + bind, absl::StrCat("--world_size=", config.world_size),
       absl::StrCat("--max_ranks=", config.max_ranks), "--world_id=" + config.world_id,
       "--heartbeat_timeout=" + absl::FormatDuration(config.heartbeat_timeout),
       absl::StrCat("--tls=", TlsModeName(config.tls.mode)), "--tls_cert=" + config.tls.cert_file,
       "--tls_key=" + config.tls.key_file, "--tls_ca=" + config.tls.ca_file});
  if (!address_file.empty()) command.argv.push_back("--address_file=" + address_file);
  command.env = {"HMC_TOKEN=" + config.token};
  return command;
}

}  // namespace

absl::StatusOr<CoordinatorProcess> StartCoordinatorProcess(const std::string& program,
                                                           const CoordinatorPlacement& placement,
                                                           const CoordinatorConfig& config) {
  if (access(program.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrFormat(
        "%s: %s (hmcrun --restart=on-failure runs its coordinator as a process of its own, "
        "hmc-coordinator, from hmcrun's directory)",
        program, std::strerror(errno)));
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string address_file = absl::StrFormat(
      "%s/hmcrun-%d-coordinator", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", getpid());
  unlink(address_file.c_str());
  const RankCommand first =
      CoordinatorCommand(program, placement, config, placement.bind, address_file);
  absl::StatusOr<Process> process = Process::Spawn(first.argv, first.env);
  if (!process.ok()) return process.status();
  // It writes its address once it listens; bounded by the handshake's patience.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::string written;
  for (int polls = 0; absl::Now() < deadline && polls < 1000; ++polls) {
    std::ifstream in(address_file);
    if (in && std::getline(in, written) && !written.empty()) break;
    int code;
    if (process->Poll(&code)) {
      return absl::UnavailableError(absl::StrFormat(
          "the coordinator (%s) exited with status %d before listening", program, code));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  unlink(address_file.c_str());
  absl::StatusOr<SocketAddress> address = SocketAddress::Parse(written);
  if (!address.ok()) {
    return absl::DeadlineExceededError(
        absl::StrFormat("the coordinator (%s, pid %d) did not say where it listens within 10s",
                        program, process->pid()));
  }
  CoordinatorProcess started{
      .process = std::move(*process),
      .restart = CoordinatorCommand(program, placement, config, address->ToString(), ""),
      .address = AnnouncedAddress(placement, *address)};
  return started;
}

}  // namespace hmc
