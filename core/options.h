#ifndef HMC_CORE_OPTIONS_H_
#define HMC_CORE_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hmc {

// Every tunable of the runtime, each with one name. The name `foo_bar` is read from the environment
// variable HMC_FOO_BAR (as hmcrun sets them) and from the flag --foo_bar=VALUE; a flag wins over
// the environment. kOptionTable below documents each one; the README's option table is printed from
// it by `hmc-perf --help-options`.
struct Options {
  // Bootstrap.
  std::string coordinator;  // host:port of the coordinator.
  std::string token;        // Shared secret; empty only with `insecure`.
  bool insecure = false;    // Run without a token: peers are not authenticated.
  std::string world_id = "hmc";
  int64_t world_size = 0;  // 0: taken from the coordinator.
  int64_t rank = -1;       // -1: first come, first served.
  std::string zone = "default";
  std::string bind_addr;  // Empty: the local address that reaches the coordinator.

  // Protection of TCP links.
  std::string tls = "auto";  // auto, on or off (TlsMode).
  std::string tls_cert;      // Certificates instead of keys from the token: all three, or none.
  std::string tls_key;
  std::string tls_ca;
  bool tls_kernel = true;         // Kernel TLS (kTLS) where the kernel and OpenSSL offer it.
  std::string integrity = "mac";  // Frame seals where TLS is off: mac, crc or off.

  // Transport.
  std::string transport = "auto";  // Per link class: auto, tcp, ucx, ofi, intra=ucx,...
  std::string ofi_provider = "tcp;ofi_rxm";
  int64_t streams = 0;                   // TCP connections per peer; 0: chosen by a probe.
  int64_t max_streams = 32;              // Connections opened when streams is 0.
  bool adapt_streams = true;             // When streams is 0: per link and size, from transfers.
  bool local_sockets = true;             // Unix domain sockets to peers in this network namespace.
  int64_t pull_min_bytes = 64 << 10;     // Single-copy pulls from local peers; 0: off.
  int64_t socket_buffer_bytes = 0;       // SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning.
  std::string tcp_congestion;            // TCP_CONGESTION of every TCP socket; empty: the host's.
  int64_t stripe_min_bytes = 256 << 10;  // Messages below this go on one stream.
  int64_t max_frame_bytes = int64_t{1} << 32;
  int64_t max_unexpected_bytes = int64_t{256} << 20;

  // Collectives.
  std::string algo = "auto";         // auto or a name of collectives/allreduce_algorithms.h.
  std::string codec_inter = "none";  // Codec on links between zones; auto: the tuner's choice.
  std::string codec_intra = "none";  // Codec on links inside a zone.
  std::string shares = "auto";       // Butterfly shares: auto, equal or one weight per rank.
  bool probe = true;                 // Measure every link at creation.
  bool explore = true;               // Auto all-reduces try each candidate algorithm first.
  bool pace_sends = true;            // Cross-zone sends share the measured rate.
  std::string prices;                // Egress price table file; empty: the built-in one.
  int64_t small_message_bytes = 256 << 10;
  int64_t chunk_bytes = 2 << 20;  // Pipeline segment.
  bool check_args = true;
  int64_t workers = 2;     // Threads that run collectives (several may be in flight).
  bool bind = true;        // Pin hmc's threads near the NIC, local ranks spread (core/placement.h).
  int64_t local_rank = 0;  // Among the ranks on this machine (hmcrun sets both).
  int64_t local_size = 1;
  int64_t min_ranks = 1;  // The group goes on after failures while this many ranks live.

  // Deadlines.
  absl::Duration timeout = absl::Minutes(5);  // Default deadline of one collective.
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::ZeroDuration();  // Zero: from round trips.

  // Reads HMC_* variables over the defaults.
  static absl::StatusOr<Options> FromEnvironment();

  // The connections opened to each peer: `streams`, or `max_streams` when a probe chooses.
  int connections_per_peer() const { return static_cast<int>(streams > 0 ? streams : max_streams); }

  // Sets one option by name (`streams`, not `HMC_STREAMS`).
  absl::Status Set(absl::string_view name, absl::string_view value);

  // Consumes every `--name=value` argument that names an option and returns the others in order.
  absl::StatusOr<std::vector<std::string>> ApplyFlags(const std::vector<std::string>& args);

  // The environment (HMC_NAME=value) that makes a child process see these options.
  std::vector<std::string> ToEnvironment() const;

  // A markdown table of every option: name, variable, default, meaning.
  static std::string DescribeAll();
};

}  // namespace hmc

#endif  // HMC_CORE_OPTIONS_H_
