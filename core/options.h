#ifndef HMC_CORE_OPTIONS_H_
#define HMC_CORE_OPTIONS_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/option_table.h"

namespace hmc {

// The least silence after which a rank or a link is declared failed when heartbeat_timeout is 0
// (auto), at the coordinator and on data links alike: several retransmission timeouts of a lossy
// 300 ms path fit in it, and so does the queue a link probe fills (while a group of eight probed
// its links on the emulated four continents, a live rank's heartbeats arrived 3.06 s apart, and a
// 3 s floor removed it from the group).
inline constexpr absl::Duration kAutoLivenessTimeout = absl::Seconds(10);

// The core's tunables: how a rank finds its group (bootstrap), how its TCP links and its
// coordinator connection are protected (TLS), and how fast failures are seen. Each has one name:
// `foo_bar` is read from the environment variable HMC_FOO_BAR (as hmcrun sets them) and from the
// flag --foo_bar=VALUE, a flag winning over the environment (hmc::Options, collectives/options.h,
// which joins every layer's). Table() documents each one.
struct CoreOptions {
  // Bootstrap.
  std::string coordinator;  // host:port of the coordinator.
  std::string token;        // Shared secret; empty only with `insecure`.
  bool insecure = false;    // Run without a token: peers are not authenticated.
  std::string world_id = "hmc";
  int64_t world_size = 0;  // 0: taken from the coordinator.
  int64_t rank = -1;       // -1: first come, first served.
  std::string zone = "default";
  std::string bind_addr;  // Empty: the local address that reaches the coordinator.

  // Protection of TCP links and of the coordinator connection.
  std::string tls = "auto";  // auto, on or off (TlsMode).
  std::string tls_cert;      // Certificates instead of keys from the token: all three, or none.
  std::string tls_key;
  std::string tls_ca;
  bool tls_kernel = true;  // Kernel TLS (kTLS) where the kernel and OpenSSL offer it.

  // Deadlines and liveness.
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::ZeroDuration();  // Zero: auto (below).

  static std::span<const OptionSpec<CoreOptions>> Table();
  // The values that cannot work together or at all, named.
  absl::Status Validate() const;
};

}  // namespace hmc

#endif  // HMC_CORE_OPTIONS_H_
