#include "transports/ucx/ucx_channel.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace hmc {
namespace {

constexpr size_t kMaxLeaveReasonBytes = 1024;
// How long a failed link's endpoint stays open after it sent the peer its reason.
constexpr absl::Duration kLeaveGrace = absl::Milliseconds(200);

ucp_request_param_t HostParams(void* user_data) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.user_data = user_data;
  p.memory_type = UCS_MEMORY_TYPE_HOST;
  return p;
}

}  // namespace

// What UCX holds of one operation until its callback: the channel, the request to complete and,
// for a send, its header (UCX reads it until the send completes).
struct UcxChannel::InFlight {
  std::shared_ptr<UcxChannel> channel;
  RequestPtr request;  // Null for control messages and endpoint closes.
  bool send = false;
  bool data = false;  // Counted in the link's stats.
  size_t bytes = 0;
  alignas(8) uint8_t header[sizeof(UcxDataHeader)] = {};
  std::vector<uint8_t> payload;  // A control message's.
};

UcxChannel::UcxChannel(UcxWorker* worker, int self_rank, const PeerAddress& peer,
                       FailureNotice on_failure)
    : ProvenChannel(self_rank, peer, std::move(on_failure)), worker_(worker) {}

UcxChannel::~UcxChannel() = default;

RequestPtr UcxChannel::Send(uint64_t tag, const void* data, size_t bytes) {
  auto request = std::make_shared<Request>();
  worker_->Post([self = shared_from_this(), tag, data, bytes, request] {
    self->StartSend(tag, data, bytes, request);
  });
  return request;
}

RequestPtr UcxChannel::Recv(uint64_t tag, void* data, size_t bytes) {
  return PostReceive(tag, data, bytes, /*up_to=*/false);
}

RequestPtr UcxChannel::RecvUpTo(uint64_t tag, void* data, size_t capacity) {
  return PostReceive(tag, data, capacity, /*up_to=*/true);
}

void UcxChannel::Close(const absl::Status& why) {
  worker_->Post(
      [self = shared_from_this(), why] { self->Fail(why, /*tell_peer=*/true, /*notify=*/false); });
}

void UcxChannel::DiscardTagsBelow(uint64_t floor, const absl::Status& why) {
  worker_->Post([self = shared_from_this(), floor, why] {
    if (floor <= self->floor_) return;
    self->floor_ = floor;
    self->floor_why_ = why;
    for (auto it = self->posted_.begin(); it != self->posted_.end() && it->first < floor;) {
      it->second.request->Complete(why);
      it = self->posted_.erase(it);
    }
    for (auto it = self->arrived_.begin(); it != self->arrived_.end() && it->first < floor;) {
      self->Release(it->second);
      it = self->arrived_.erase(it);
    }
  });
}

absl::Status UcxChannel::Open(const std::string& worker_address, bool local) {
  local_ = local;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(worker_address.data());
  // A peer that dies fails this endpoint (and its operations) instead of leaving them pending,
  // and only such an endpoint can be closed by force, which is what releases sends to a peer that
  // stopped receiving. UCX 1.13's shared-memory transports cannot detect a dead peer, so it leaves
  // them out of such endpoints: peers on one host talk over UCX's TCP (or RDMA) here, and hmc's own
  // TCP transport, with its local sockets and single-copy pulls, is the faster choice between them.
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxChannel::OnEndpointError;
  params.err_handler.arg = this;  // Channels outlive their endpoints (the transport closes them).
  if (ucs_status_t s = ucp_ep_create(worker_->worker(), &params, &ep_); s != UCS_OK) {
    ep_ = nullptr;
    return Error(absl::StrFormat("creating a UCX endpoint: %s", ucs_status_string(s)));
  }
  return absl::OkStatus();
}

void UcxChannel::SendControl(ControlMessage type, const std::vector<uint8_t>& payload) {
  if (ep_ == nullptr) return;
  auto* op =
      new InFlight{shared_from_this(), nullptr, /*send=*/true, /*data=*/false, payload.size()};
  const UcxControlHeader header{self_rank_, static_cast<uint8_t>(type), {}};
  std::memcpy(op->header, &header, sizeof(header));
  op->payload = payload;
  ucp_request_param_t p = HostParams(op);
  p.cb.send = &UcxChannel::OnSendDone;
  const ucs_status_ptr_t r =
      ucp_am_send_nbx(ep_, static_cast<unsigned>(UcxAm::kControl), op->header, sizeof(header),
                      op->payload.data(), op->payload.size(), &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) Finish(op, UCS_PTR_STATUS(r), op->bytes);
}

void UcxChannel::StartSend(uint64_t tag, const void* data, size_t bytes, RequestPtr request) {
  if (failed_) {
    request->Complete(status());
    return;
  }
  if (goodbye_sent) {  // Nothing goes after it.
    request->Complete(
        Error(got_goodbye_ ? "the peer closed the channel" : "channel is shutting down"));
    return;
  }
  if (tag < floor_) {
    request->Complete(floor_why_);
    return;
  }
  if (!ready_done_) {
    before_ready_.push_back(
        [this, tag, data, bytes, request] { StartSend(tag, data, bytes, request); });
    return;
  }
  auto* op =
      new InFlight{shared_from_this(), std::move(request), /*send=*/true, /*data=*/true, bytes};
  ++sends_in_flight_;
  const UcxDataHeader header{tag, self_rank_, 0};
  std::memcpy(op->header, &header, sizeof(header));
  ucp_request_param_t p = HostParams(op);
  p.cb.send = &UcxChannel::OnSendDone;
  const ucs_status_ptr_t r = ucp_am_send_nbx(ep_, static_cast<unsigned>(UcxAm::kData), op->header,
                                             sizeof(header), data, bytes, &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) Finish(op, UCS_PTR_STATUS(r), bytes);
}

RequestPtr UcxChannel::PostReceive(uint64_t tag, void* data, size_t capacity, bool up_to) {
  auto request = std::make_shared<Request>();
  worker_->Post([self = shared_from_this(), tag, posted = Posted{data, capacity, up_to, request}] {
    if (self->failed_) {
      posted.request->Complete(self->status());
      return;
    }
    if (tag < self->floor_) {
      posted.request->Complete(self->floor_why_);
      return;
    }
    if (auto it = self->arrived_.find(tag); it != self->arrived_.end()) {
      Arrival arrival = std::move(it->second);
      self->arrived_.erase(it);
      self->Match(tag, posted, std::move(arrival));
      return;
    }
    if (self->got_goodbye_) {
      posted.request->Complete(self->Error("the peer closed the channel"));
      return;
    }
    if (!self->posted_.emplace(tag, posted).second) {
      posted.request->Complete(absl::FailedPreconditionError(absl::StrFormat(
          "%s: a receive under tag %#x is already pending", self->description_, tag)));
    }
  });
  return request;
}

ucs_status_t UcxChannel::OnData(uint64_t tag, void* data, size_t length, bool rendezvous) {
  // Dropped: a long message's send then completes at the sender.
  if (failed_ || tag < floor_) return UCS_OK;
  if (arrived_.contains(tag)) {
    Fail(Error(absl::StrFormat("two messages under tag %#x arrived before a receive", tag)),
         /*tell_peer=*/true, /*notify=*/true);
    return UCS_OK;
  }
  Arrival arrival;
  arrival.length = length;
  if (rendezvous) {
    arrival.rendezvous = data;
  } else {
    const auto* bytes = static_cast<const uint8_t*>(data);
    arrival.eager.assign(bytes, bytes + length);
  }
  auto it = posted_.find(tag);
  if (it == posted_.end()) {
    arrived_.emplace(tag, std::move(arrival));
  } else {
    // Matched after this callback returns: UCP's calls are not made from inside its callbacks.
    worker_->Post(
        [self = shared_from_this(), tag, posted = it->second,
         arrival = std::move(arrival)]() mutable { self->Match(tag, posted, std::move(arrival)); });
    posted_.erase(it);
  }
  return rendezvous ? UCS_INPROGRESS : UCS_OK;
}

void UcxChannel::Match(uint64_t tag, Posted posted, Arrival arrival) {
  if (failed_ || tag < floor_) {
    Release(arrival);
    posted.request->Complete(failed_ ? status() : floor_why_);
    return;
  }
  const bool fits =
      posted.up_to ? arrival.length <= posted.capacity : arrival.length == posted.capacity;
  if (!fits) {
    Release(arrival);
    const absl::Status why = Error(absl::StrFormat(
        "message size mismatch for tag %#x: the peer sent %d bytes, the receive expects %s%d", tag,
        arrival.length, posted.up_to ? "at most " : "", posted.capacity));
    Fail(why, /*tell_peer=*/true, /*notify=*/true);
    posted.request->Complete(why);
    return;
  }
  if (arrival.rendezvous == nullptr) {
    if (arrival.length > 0) std::memcpy(posted.data, arrival.eager.data(), arrival.length);
    CountReceived(arrival.length);
    posted.request->Complete(absl::OkStatus(), arrival.length);
    return;
  }
  auto* op = new InFlight{shared_from_this(), posted.request, /*send=*/false, /*data=*/true,
                          arrival.length};
  ucp_request_param_t p = HostParams(op);
  p.cb.recv_am = &UcxChannel::OnReceiveDone;
  const ucs_status_ptr_t r =
      ucp_am_recv_data_nbx(worker_->worker(), arrival.rendezvous, posted.data, arrival.length, &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) Finish(op, UCS_PTR_STATUS(r), arrival.length);
}

void UcxChannel::Release(Arrival& arrival) {
  if (arrival.rendezvous != nullptr) ucp_am_data_release(worker_->worker(), arrival.rendezvous);
  arrival.rendezvous = nullptr;
}

void UcxChannel::Finish(InFlight* op, ucs_status_t status, size_t length) {
  std::unique_ptr<InFlight> owned(op);
  if (op->send && op->data) --sends_in_flight_;
  if (status == UCS_OK && op->data) {
    if (op->send) {
      CountSent(length);
    } else {
      CountReceived(length);
    }
  }
  if (op->request == nullptr) return;
  if (status == UCS_OK) {
    op->request->Complete(absl::OkStatus(), length);
  } else {
    op->request->Complete(
        failed_ ? this->status()
                : Error(absl::StrFormat("%s failed: %s", op->send ? "send" : "receive",
                                        ucs_status_string(status))));
  }
}

void UcxChannel::OnSendDone(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<InFlight*>(user_data);
  ucp_request_free(request);
  op->channel->Finish(op, status, op->bytes);
}

void UcxChannel::OnReceiveDone(void* request, ucs_status_t status, size_t length, void* user_data) {
  auto* op = static_cast<InFlight*>(user_data);
  ucp_request_free(request);
  op->channel->Finish(op, status, length);
}

void UcxChannel::OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* channel = static_cast<UcxChannel*>(arg);
  // After the peer's goodbye its endpoint going away is the expected end, not a failure.
  channel->Fail(channel->Error(absl::StrFormat("connection lost: %s", ucs_status_string(status))),
                /*tell_peer=*/false, /*notify=*/!channel->got_goodbye_);
}

void UcxChannel::OnReady() {
  if (ready_done_ || failed_) return;
  ready_done_ = true;
  ready_->Complete(absl::OkStatus());
  std::vector<std::function<void()>> sends = std::move(before_ready_);
  for (auto& send : sends) send();
}

void UcxChannel::Fail(const absl::Status& why, bool tell_peer, bool notify) {
  if (failed_) return;
  if (tell_peer) {
    const std::string reason(why.message().substr(0, kMaxLeaveReasonBytes));
    SendControl(ControlMessage::kLeave, StringsPayload({reason}));
  }
  failed_ = true;
  SetStatus(why);
  for (auto& [tag, posted] : posted_) posted.request->Complete(why);
  posted_.clear();
  for (auto& [tag, arrival] : arrived_) Release(arrival);
  arrived_.clear();
  std::vector<std::function<void()>> sends = std::move(before_ready_);
  for (auto& send : sends) send();  // Each fails with `why`.
  ready_->Complete(why);            // Ignored where the handshake had finished.
  // Sends to a peer that is gone (or stopped receiving) would stay pending: closing the endpoint
  // by force completes them, once the notice to the peer had time to leave.
  worker_->PostAfter(tell_peer ? kLeaveGrace : absl::ZeroDuration(),
                     [self = shared_from_this()] { self->CloseEndpoint(/*force=*/true); });
  if (notify) on_failure_(peer_rank_, why);
}

void UcxChannel::OnGoodbye() {
  // Everything the peer sent arrived before its goodbye (one endpoint, in order): what arrived
  // stays deliverable, receives nothing can satisfy any more fail.
  got_goodbye_ = true;
  const absl::Status why = Error("the peer closed the channel");
  for (auto& [tag, posted] : posted_) posted.request->Complete(why);
  posted_.clear();
  // The peer waits for this side's goodbye before it closes its endpoint: answer now, behind
  // everything sent so far, instead of at this side's own shutdown.
  SayGoodbyeOnce(*this);
}

RequestPtr UcxChannel::CloseEndpoint(bool force) {
  auto done = std::make_shared<Request>();
  if (ep_ == nullptr) {
    done->Complete(absl::OkStatus());
    return done;
  }
  auto* op = new InFlight{shared_from_this(), done, /*send=*/true, /*data=*/false, 0};
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = &UcxChannel::OnSendDone;
  p.user_data = op;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  const ucs_status_ptr_t r = ucp_ep_close_nbx(ep_, &p);
  ep_ = nullptr;
  // A close that fails still released the endpoint: either way the link is gone.
  if (r == nullptr || UCS_PTR_IS_ERR(r)) Finish(op, UCS_OK, 0);
  return done;
}

}  // namespace hmc
