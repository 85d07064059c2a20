#include "transports/transport_factory.h"

#include <filesystem>
#include <map>
#include <system_error>

#include "absl/strings/str_format.h"
#include "core/frame_seal.h"
#include "core/log.h"
#include "core/socket.h"
#include "core/tls.h"
#include "core/transport_choice.h"
#include "transports/per_link_transport.h"
#include "transports/tcp/tcp_transport.h"
#ifdef HMC_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif
#ifdef HMC_HAVE_OFI
#include "transports/ofi/ofi_transport.h"
#endif

namespace hmc {
namespace {

absl::StatusOr<TcpTransportConfig> TcpConfigFrom(const TransportSettings& options,
                                                 const TransportSite& site) {
  TcpTransportConfig config;
  config.bind = options.bind_addr.empty() ? site.default_bind : options.bind_addr;
  config.token = options.token;
  config.insecure = options.insecure;
  config.world_id = options.world_id;
  config.socket_buffer_bytes = options.socket_buffer_bytes;
  config.tcp_congestion = options.tcp_congestion;
  config.local_sockets = options.local_sockets;
  config.waiters_poll = options.waiters_poll;
  config.waiter_spin_us = options.waiter_spin_us;
  config.ranks_on_host = site.ranks_on_host;
  absl::StatusOr<TlsConfig> tls = TlsConfigFrom(options);
  if (!tls.ok()) return tls.status();
  absl::StatusOr<FrameIntegrity> integrity = ParseFrameIntegrity(options.integrity);
  if (!integrity.ok()) return integrity.status();
  config.tls = *tls;
  config.limits.integrity = *integrity;
  config.max_unexpected_bytes = static_cast<uint64_t>(options.max_unexpected_bytes);
  config.limits.streams = options.connections_per_peer();
  config.limits.adapt_streams = options.adapts_streams();
  config.limits.stripe_min_bytes = static_cast<uint64_t>(options.stripe_min_bytes);
  config.limits.max_frame_bytes = static_cast<uint64_t>(options.max_frame_bytes);
  config.limits.epoch = site.epoch;
  config.limits.pull_min_bytes = static_cast<uint64_t>(options.pull_min_bytes);
  config.limits.liveness_timeout = options.heartbeat_timeout > absl::ZeroDuration()
                                       ? options.heartbeat_timeout
                                       : kAutoLivenessTimeout;
  return config;
}

// Whether this host has an RDMA device (InfiniBand, RoCE, EFA all register here): what UCX
// reaches and TCP does not.
bool HasRdmaDevice() {
  std::error_code ec;
  std::filesystem::directory_iterator devices("/sys/class/infiniband", ec);
  return !ec && devices != std::filesystem::directory_iterator();
}

[[maybe_unused]] absl::Status NotBuilt(const TransportSettings& options, absl::string_view what,
                                       absl::string_view package, absl::string_view flag) {
  return absl::FailedPreconditionError(
      absl::StrFormat("transport=%s: this hmc was built without %s (install %s and rebuild; %s)",
                      options.transport, what, package, flag));
}

absl::StatusOr<std::unique_ptr<Transport>> MakeOther(TransportKind kind,
                                                     const TransportSettings& options,
                                                     const TransportSite& site) {
  if (kind == TransportKind::kUcx) {
#ifdef HMC_HAVE_UCX
    UcxTransportConfig config;
    config.token = options.token;
    config.insecure = options.insecure;
    config.world_id = options.world_id;
    config.epoch = site.epoch;
    // UCX_TLS, UCX_NET_DEVICES and UCX's other variables select its resources.
    absl::StatusOr<std::unique_ptr<UcxTransport>> ucx = UcxTransport::Create(config);
    if (!ucx.ok()) return ucx.status();
    return std::unique_ptr<Transport>(std::move(*ucx));
#else
    return NotBuilt(options, "UCX", "libucx-dev", "HMC_WITH_UCX");
#endif
  }
#ifdef HMC_HAVE_OFI
  OfiTransportConfig config;
  config.token = options.token;
  config.insecure = options.insecure;
  config.world_id = options.world_id;
  config.epoch = site.epoch;
  config.resources.provider = options.ofi_provider;
  config.resources.register_always = options.ofi_register == "always";
  // On the interface that reaches the coordinator, as TCP's links.
  absl::StatusOr<SocketAddress> bind =
      SocketAddress::Parse(options.bind_addr.empty() ? site.default_bind : options.bind_addr);
  if (bind.ok()) config.resources.source = bind->host();
  absl::StatusOr<std::unique_ptr<OfiTransport>> ofi = OfiTransport::Create(config);
  if (!ofi.ok()) return ofi.status();
  Logf("transport", "libfabric: %s", (*ofi)->Describe());
  return std::unique_ptr<Transport>(std::move(*ofi));
#else
  (void)site;
  return NotBuilt(options, "libfabric", "libfabric-dev", "HMC_WITH_OFI");
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const TransportSettings& options,
                                                         const TransportSite& site) {
  absl::StatusOr<TransportChoice> choice = ParseTransportChoice(options.transport);
  if (!choice.ok()) return choice.status();
  if (choice->automatic) {
#ifdef HMC_HAVE_UCX
    if (HasRdmaDevice()) choice->intra = TransportKind::kUcx;
#endif
  }
  absl::StatusOr<TcpTransportConfig> config = TcpConfigFrom(options, site);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::unique_ptr<TcpTransport>> tcp = TcpTransport::Create(*config);
  if (!tcp.ok()) return tcp.status();
  if (choice->intra == TransportKind::kTcp && choice->inter == TransportKind::kTcp) {
    return std::unique_ptr<Transport>(std::move(*tcp));
  }
  std::map<TransportKind, std::unique_ptr<Transport>> others;
  for (TransportKind kind : {choice->intra, choice->inter}) {
    if (kind == TransportKind::kTcp || others.contains(kind)) continue;
    absl::StatusOr<std::unique_ptr<Transport>> other = MakeOther(kind, options, site);
    if (!other.ok()) return other.status();
    others[kind] = std::move(*other);
  }
  Logf("transport", "links inside zone %s: %s; to other zones: %s", options.zone,
       TransportKindName(choice->intra), TransportKindName(choice->inter));
  return std::unique_ptr<Transport>(
      new PerLinkTransport(std::move(*tcp), std::move(others), *choice, options.zone));
}

}  // namespace hmc
