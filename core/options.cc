#include "core/options.h"

#include "core/tls_mode.h"

namespace hmc {
namespace {

// In the order of the struct.
const OptionSpec<CoreOptions> kCoreOptions[] = {
    {"coordinator", &CoreOptions::coordinator, "Coordinator address, host:port or [v6]:port."},
    {"token", &CoreOptions::token, "Shared secret for HMAC challenge-response; never sent."},
    {"insecure", &CoreOptions::insecure,
     "Allow an empty token: anyone who reaches the coordinator or a rank may join (every rank "
     "logs it). Without it an empty token is refused."},
    {"world_id", &CoreOptions::world_id, "Name of the group; peers of another world are refused."},
    {"world_size", &CoreOptions::world_size, "Number of ranks; 0 takes it from the coordinator."},
    {"rank", &CoreOptions::rank, "This process's rank; -1 lets the coordinator assign one."},
    {"zone", &CoreOptions::zone, "Zone (region or site) this rank runs in."},
    {"bind_addr", &CoreOptions::bind_addr,
     "Address the transport listens on; empty: the local address that reaches the coordinator."},
    {"tls", &CoreOptions::tls,
     "TLS 1.3 on TCP links to peers: auto (where either end's address is neither private nor "
     "loopback), on or off. Keys come from the token unless certificates are given. Never on "
     "local sockets."},
    {"tls_cert", &CoreOptions::tls_cert,
     "PEM certificate chain this rank presents; with tls_key and tls_ca, peers verify each "
     "other's certificates instead of deriving keys from the token."},
    {"tls_key", &CoreOptions::tls_key, "PEM private key of tls_cert."},
    {"tls_ca", &CoreOptions::tls_ca,
     "PEM certificates of the authorities peers' certificates must "
     "chain to."},
    {"tls_kernel", &CoreOptions::tls_kernel,
     "Hand TLS records to the kernel (kTLS) where the kernel and OpenSSL allow it, so sends stay "
     "zero-copy; off keeps sealing and opening in OpenSSL on the progress thread. Each link logs "
     "which one it got."},
    {"connect_timeout", &CoreOptions::connect_timeout,
     "Deadline for joining the coordinator and connecting to every peer."},
    {"heartbeat_interval", &CoreOptions::heartbeat_interval,
     "How often a rank tells the coordinator it lives."},
    {"heartbeat_timeout", &CoreOptions::heartbeat_timeout,
     "Silence after which a rank is declared failed: by the coordinator (no heartbeat) and on "
     "data links (unacknowledged data or unanswered keepalives, TCP_USER_TIMEOUT); 0 (auto): 10 s "
     "(several retransmissions of a lossy 300 ms path, or a queue a link probe filled, fit in it), "
     "or ten round trips of the rank's coordinator connection at the coordinator where longer."},
};

}  // namespace

std::span<const OptionSpec<CoreOptions>> CoreOptions::Table() { return kCoreOptions; }

absl::Status CoreOptions::Validate() const {
  if (absl::StatusOr<TlsMode> mode = ParseTlsMode(tls); !mode.ok()) return mode.status();
  return absl::OkStatus();
}

}  // namespace hmc
