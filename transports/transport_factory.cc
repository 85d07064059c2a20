#include "transports/transport_factory.h"

#include "core/frame_seal.h"
#include "core/tls.h"
#include "transports/tcp/tcp_transport.h"

namespace hmc {
namespace {

// Data links fail after this long without delivering when heartbeat_timeout is auto: several
// retransmission timeouts of a lossy 300 ms path fit in it, a vanished host does not stay hidden.
constexpr absl::Duration kDataLinkLivenessTimeout = absl::Seconds(10);

absl::StatusOr<TcpTransportConfig> TcpConfigFrom(const Options& options,
                                                 const TransportSite& site) {
  TcpTransportConfig config;
  config.bind = options.bind_addr.empty() ? site.default_bind : options.bind_addr;
  config.token = options.token;
  config.insecure = options.insecure;
  config.world_id = options.world_id;
  config.socket_buffer_bytes = options.socket_buffer_bytes;
  config.tcp_congestion = options.tcp_congestion;
  config.local_sockets = options.local_sockets;
  absl::StatusOr<TlsConfig> tls = TlsConfigFrom(options);
  if (!tls.ok()) return tls.status();
  absl::StatusOr<FrameIntegrity> integrity = ParseFrameIntegrity(options.integrity);
  if (!integrity.ok()) return integrity.status();
  config.tls = *tls;
  config.limits.integrity = *integrity;
  config.max_unexpected_bytes = static_cast<uint64_t>(options.max_unexpected_bytes);
  config.limits.streams = options.connections_per_peer();
  config.limits.adapt_streams = options.streams == 0 && options.adapt_streams;
  config.limits.stripe_min_bytes = static_cast<uint64_t>(options.stripe_min_bytes);
  config.limits.max_frame_bytes = static_cast<uint64_t>(options.max_frame_bytes);
  config.limits.epoch = site.epoch;
  config.limits.pull_min_bytes = static_cast<uint64_t>(options.pull_min_bytes);
  config.limits.liveness_timeout = options.heartbeat_timeout > absl::ZeroDuration()
                                       ? options.heartbeat_timeout
                                       : kDataLinkLivenessTimeout;
  return config;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const Options& options,
                                                         const TransportSite& site) {
  absl::StatusOr<TcpTransportConfig> config = TcpConfigFrom(options, site);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::unique_ptr<TcpTransport>> tcp = TcpTransport::Create(*config);
  if (!tcp.ok()) return tcp.status();
  return std::unique_ptr<Transport>(std::move(*tcp));
}

}  // namespace hmc
