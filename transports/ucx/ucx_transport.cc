#include "transports/ucx/ucx_transport.h"

#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/auth.h"
#include "core/log.h"
#include "transports/published_address.h"

namespace hmc {
namespace {

constexpr char kAddressKind[] = "ucx";

}  // namespace

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(
    const UcxTransportConfig& config) {
  if (absl::Status s = RequireToken(config.token, config.insecure, "rank transport"); !s.ok()) {
    return s;
  }
  std::unique_ptr<UcxTransport> transport(new UcxTransport(config));
  absl::StatusOr<std::unique_ptr<UcxWorker>> worker = UcxWorker::Create(config.resources);
  if (!worker.ok()) return worker.status();
  UcxWorker* w = worker->get();
  transport->worker_ = std::move(*worker);
  transport->host_ = HostAndNamespace();
  transport->address_ = PublishedAddress(kAddressKind, w->address());
  UcxTransport* t = transport.get();
  transport->links_ = std::make_unique<ProvenLinks<UcxChannel>>(
      HandshakeSettings{config.token, config.world_id, config.epoch}, "UCX", &w->thread(),
      [t, w](const PeerAddress& peer, std::function<void(int, const absl::Status&)> on_failure) {
        return std::make_shared<UcxChannel>(w, t->links_->rank(), peer, std::move(on_failure));
      },
      [t](UcxChannel& channel, const PeerAddress& peer) {
        const std::optional<ParsedAddress> address =
            ParsePublishedAddress(kAddressKind, peer.address);
        if (!address.has_value()) {
          return channel.Error(absl::StrFormat(
              "publishes no UCX address (it published '%s'): every rank of a link must run the "
              "UCX transport",
              peer.address.substr(0, 80)));
        }
        return channel.Open(address->bytes, address->host == t->host_);
      });
  ucs_status_t status = UCS_OK;
  w->RunAndWait([&] {
    for (auto [id, callback] : {std::pair{UcxAm::kControl, &UcxTransport::ControlArrived},
                                std::pair{UcxAm::kData, &UcxTransport::DataArrived}}) {
      ucp_am_handler_param_t handler{};
      handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                           UCP_AM_HANDLER_PARAM_FIELD_ARG;
      handler.id = static_cast<unsigned>(id);
      handler.cb = callback;
      handler.arg = t;
      if (status == UCS_OK) status = ucp_worker_set_am_recv_handler(w->worker(), &handler);
    }
  });
  if (status != UCS_OK) return UcxError(status, "UCX: setting the message handlers");
  return transport;
}

UcxTransport::~UcxTransport() {
  if (worker_ == nullptr) return;
  if (!shut_down_) Shutdown(absl::Now()).IgnoreError();  // Never shut down: no wait for goodbyes.
  // A peer's late message (one of another world or epoch, say) must find no handler that reaches
  // for the links after they are gone: the worker's thread runs until worker_ is destroyed.
  worker_->RunAndWait([this] { delivering_ = false; });
  links_->Clear();
  links_.reset();
  worker_.reset();
}

ucs_status_t UcxTransport::ControlArrived(void* arg, const void* header, size_t header_length,
                                          void* data, size_t length,
                                          const ucp_am_recv_param_t* param) {
  // Control messages are short: one sent by rendezvous is not hmc's, and is dropped.
  if (header_length != sizeof(UcxControlHeader) ||
      (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    return UCS_OK;
  }
  auto* transport = static_cast<UcxTransport*>(arg);
  if (!transport->delivering_) return UCS_OK;
  UcxControlHeader h;
  std::memcpy(&h, header, sizeof(h));
  transport->links_->OnControl(h.from, static_cast<ControlMessage>(h.type),
                               std::span<const uint8_t>(static_cast<const uint8_t*>(data), length));
  return UCS_OK;
}

ucs_status_t UcxTransport::DataArrived(void* arg, const void* header, size_t header_length,
                                       void* data, size_t length,
                                       const ucp_am_recv_param_t* param) {
  if (header_length != sizeof(UcxDataHeader)) return UCS_OK;
  auto* transport = static_cast<UcxTransport*>(arg);
  if (!transport->delivering_) return UCS_OK;
  UcxDataHeader h;
  std::memcpy(&h, header, sizeof(h));
  // Data from a rank that did not prove the token is dropped.
  UcxChannel* channel = transport->links_->Proven(h.from);
  if (channel == nullptr) return UCS_OK;
  return channel->OnData(h.tag, data, length, (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0);
}

absl::Status UcxTransport::Shutdown(absl::Time deadline) {
  if (shut_down_) return absl::OkStatus();
  shut_down_ = true;
  // A flushing close waits for every send; one that a receiver never took (a call that timed out)
  // would hold it past the close's deadline, and UCX 1.13 aborts when the worker is destroyed
  // with a flushing endpoint that still holds a request. So such links close by force.
  const auto outcome = links_->Shutdown(deadline, [](UcxChannel& channel, bool clean) {
    return channel.CloseEndpoint(!clean || channel.sends_in_flight() > 0);
  });
  // A flushing close waits for the peer, at most until close_deadline.
  const absl::Time close_deadline = std::max(deadline, absl::Now()) + absl::Seconds(2);
  for (const RequestPtr& close : outcome.closes) close->Wait(close_deadline).IgnoreError();
  return outcome.goodbyes;
}

}  // namespace hmc
