#include "transports/ofi/ofi_transport.h"

#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/auth.h"
#include "transports/published_address.h"

namespace hmc {
namespace {

constexpr char kAddressKind[] = "ofi";
// Control messages are short (a hello, a reason of at most 1 KiB); several may arrive at once.
constexpr size_t kControlReceives = 16;
constexpr size_t kControlBytes = 4096;

}  // namespace

absl::StatusOr<std::unique_ptr<OfiTransport>> OfiTransport::Create(
    const OfiTransportConfig& config) {
  if (absl::Status s = RequireToken(config.token, config.insecure, "rank transport"); !s.ok()) {
    return s;
  }
  std::unique_ptr<OfiTransport> transport(new OfiTransport(config));
  absl::StatusOr<std::unique_ptr<OfiEndpoint>> endpoint = OfiEndpoint::Create(config.resources);
  if (!endpoint.ok()) return endpoint.status();
  OfiEndpoint* e = endpoint->get();
  OfiTransport* t = transport.get();
  t->endpoint_ = std::move(*endpoint);
  t->host_ = HostAndNamespace();
  t->address_ = PublishedAddress(kAddressKind, e->name());
  t->links_ = std::make_unique<ProvenLinks<OfiChannel>>(
      HandshakeSettings{config.token, config.world_id, config.epoch}, "libfabric", &e->thread(),
      [t, e](const PeerAddress& peer, std::function<void(int, const absl::Status&)> on_failure) {
        return std::make_shared<OfiChannel>(e, t->links_->rank(), peer, std::move(on_failure));
      },
      [t, e](OfiChannel& channel, const PeerAddress& peer) {
        const std::optional<ParsedAddress> address =
            ParsePublishedAddress(kAddressKind, peer.address);
        if (!address.has_value()) {
          return channel.Error(absl::StrFormat(
              "publishes no libfabric address (it published '%s'): every rank of a link must "
              "run the libfabric transport",
              peer.address.substr(0, 80)));
        }
        absl::StatusOr<fi_addr_t> inserted = e->Insert(address->bytes);
        if (!inserted.ok()) return channel.Error(std::string(inserted.status().message()));
        channel.Open(*inserted, address->host == t->host_);
        return absl::OkStatus();
      });
  t->control_buffers_.assign(kControlReceives, std::vector<uint8_t>(kControlBytes));
  e->thread().RunAndWait([t] {
    for (size_t slot = 0; slot < kControlReceives; ++slot) t->ReceiveControl(slot);
  });
  return transport;
}

OfiTransport::~OfiTransport() {
  if (!shut_down_) Shutdown(absl::Now()).IgnoreError();  // Never shut down: no wait for goodbyes.
  links_->Clear();
  endpoint_.reset();  // Ends what is in flight, the control receives too, before they go.
  links_.reset();
}

void OfiTransport::ReceiveControl(size_t slot) {
  std::vector<uint8_t>& buffer = control_buffers_[slot];
  endpoint_->Start(
      FI_ADDR_UNSPEC, {buffer.data(), buffer.size(), FI_RECV},
      [this, &buffer](void* context, void* descriptor) {
        return fi_recv(endpoint_->ep(), buffer.data(), buffer.size(), descriptor, FI_ADDR_UNSPEC,
                       context);
      },
      [this, slot](void* context, int error, size_t length, size_t) {
        // The endpoint closes, or the buffer could not be registered (logged; posting it again
        // would fail alike).
        if (error == FI_ECANCELED || context == nullptr) return;
        const std::vector<uint8_t>& buffer = control_buffers_[slot];
        // A truncated or headless message is not hmc's: dropped.
        if (error == 0 && length >= sizeof(OfiControlHeader)) {
          OfiControlHeader header;
          std::memcpy(&header, buffer.data(), sizeof(header));
          links_->OnControl(
              header.from, static_cast<ControlMessage>(header.type),
              std::span<const uint8_t>(buffer.data() + sizeof(header), length - sizeof(header)));
        }
        ReceiveControl(slot);
      });
}

absl::Status OfiTransport::Shutdown(absl::Time deadline) {
  if (shut_down_) return absl::OkStatus();
  shut_down_ = true;
  return links_
      ->Shutdown(deadline, [](OfiChannel&, bool) { return CompletedRequest(absl::OkStatus()); })
      .goodbyes;
}

}  // namespace hmc
