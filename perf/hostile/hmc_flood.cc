// hmc-flood: holds connections that never prove the token against an hmc service, as a port
// scanner, a broken load balancer or an attacker would: silent (half-open from the service's
// point of view), or dribbling garbage. A connection the service drops is opened again, so the
// service faces --connections of them for --seconds. Only loopback and private addresses (an
// emulator's namespaces) are accepted as targets.
//   hmc-flood --target=127.0.0.1:29400 --connections=1000 --seconds=60 --garbage_every=2
#include <sys/socket.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "core/socket.h"

ABSL_FLAG(std::string, target, "", "HOST:PORT of the service (loopback or private only).");
ABSL_FLAG(int, connections, 1000, "Connections held open at once.");
ABSL_FLAG(int, seconds, 60, "How long to hold them.");
ABSL_FLAG(int, garbage_every, 2,
          "Every N-th connection sends a garbage byte each 100 ms; 0: none.");

namespace {

bool AllowedTarget(const std::string& host) {
  return absl::StartsWith(host, "127.") || host == "::1" || absl::StartsWith(host, "10.") ||
         absl::StartsWith(host, "192.168.");
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<hmc::SocketAddress> target =
      hmc::SocketAddress::Parse(absl::GetFlag(FLAGS_target));
  if (!target.ok() || !AllowedTarget(target->host())) {
    std::fprintf(stderr, "hmc-flood: --target must be a loopback or private HOST:PORT\n");
    return 2;
  }
  hmc::RaiseDescriptorLimit();
  const int count = absl::GetFlag(FLAGS_connections);
  const int garbage_every = absl::GetFlag(FLAGS_garbage_every);
  std::vector<hmc::UniqueFd> held(static_cast<size_t>(count));
  const absl::Time end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  uint64_t opened = 0, dropped = 0;
  bool announced = false;
  for (int tick = 0; absl::Now() < end && tick < 100 * 3600; ++tick) {
    for (int i = 0; i < count; ++i) {
      hmc::UniqueFd& fd = held[static_cast<size_t>(i)];
      if (fd.valid()) {
        char sink[256];
        const ssize_t n = recv(fd.get(), sink, sizeof(sink), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
          fd = hmc::UniqueFd();  // The service dropped it: open another.
          ++dropped;
        } else if (garbage_every > 0 && i % garbage_every == 0) {
          const char byte = static_cast<char>('G' + tick % 7);
          (void)send(fd.get(), &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
      }
      if (!fd.valid()) {
        absl::StatusOr<hmc::UniqueFd> dialed =
            hmc::ConnectTcp(*target, absl::Now() + absl::Milliseconds(200));
        if (dialed.ok()) {
          fd = std::move(*dialed);
          ++opened;
        }
      }
    }
    if (!announced) {
      std::printf("hmc-flood: holding %d connections to %s\n", count, target->ToString().c_str());
      std::fflush(stdout);
      announced = true;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  std::printf("hmc-flood: opened %llu connections, the service dropped %llu\n",
              static_cast<unsigned long long>(opened), static_cast<unsigned long long>(dropped));
  return 0;
}
