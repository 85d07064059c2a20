#include "transports/ofi/ofi_channel.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace hmc {
namespace {

constexpr size_t kMaxLeaveReasonBytes = 1024;
// How long the provider may refuse a failed link's goodbye before hmc takes the peer for
// unreachable: well past a connection's set-up on a live path, and rxm, reconnecting to a dead
// peer, refuses it for as long as anyone asks.
constexpr absl::Duration kUnreachableAfter = absl::Seconds(2);
// How often a failed link looks at the sends it still holds, and for how long in all: as long as
// a call's teardown waits for its requests (CollectiveContext::Drain).
constexpr absl::Duration kHeldSendsCheckEvery = absl::Milliseconds(250);
constexpr int kHeldSendsChecks = 120;
constexpr uint64_t kEveryTag = ~uint64_t{0};

}  // namespace

OfiChannel::OfiChannel(OfiEndpoint* endpoint, int self_rank, const PeerAddress& peer,
                       FailureNotice on_failure)
    : ProvenChannel(self_rank, peer, std::move(on_failure)), endpoint_(endpoint) {}

void OfiChannel::Open(fi_addr_t address, bool local) {
  address_ = address;
  local_ = local;
}

RequestPtr OfiChannel::Send(uint64_t tag, const void* data, size_t bytes) {
  auto request = std::make_shared<Request>();
  endpoint_->thread().Post([self = shared_from_this(), tag, data, bytes, request] {
    self->StartSend(tag, data, bytes, request);
  });
  return request;
}

RequestPtr OfiChannel::Recv(uint64_t tag, void* data, size_t bytes) {
  return PostReceive(tag, data, bytes, /*up_to=*/false);
}

RequestPtr OfiChannel::RecvUpTo(uint64_t tag, void* data, size_t capacity) {
  return PostReceive(tag, data, capacity, /*up_to=*/true);
}

void OfiChannel::Close(const absl::Status& why) {
  endpoint_->thread().Post(
      [self = shared_from_this(), why] { self->Fail(why, /*tell_peer=*/true, /*notify=*/false); });
}

RequestPtr OfiChannel::PostReceive(uint64_t tag, void* data, size_t capacity, bool up_to) {
  auto request = std::make_shared<Request>();
  endpoint_->thread().Post([self = shared_from_this(), tag, data, capacity, up_to, request] {
    self->StartReceive(tag, data, capacity, up_to, request);
  });
  return request;
}

void OfiChannel::StartSend(uint64_t tag, const void* data, size_t bytes, RequestPtr request) {
  if (failed_) {
    request->Complete(status());
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
  endpoint_->Start(
      address_, {data, bytes, FI_SEND},
      [this, tag, data, bytes, request](void* context, void* descriptor) {
        // The length travels as remote CQ data: a receiver that truncates learns what was sent.
        const ssize_t r =
            fi_tsenddata(endpoint_->ep(), data, bytes, descriptor, bytes, address_, tag, context);
        if (r == 0) sends_[context] = request;
        return r;
      },
      [self = shared_from_this(), bytes, request](void* context, int error, size_t, size_t) {
        self->sends_.erase(context);
        if (error == 0) {
          self->CountSent(bytes);
          request->Complete(absl::OkStatus(), bytes);
          return;
        }
        if (!self->failed_) {
          self->Fail(self->Error(absl::StrFormat("send failed: %s", fi_strerror(error))),
                     /*tell_peer=*/false, /*notify=*/true);
        }
        request->Complete(self->status());
      });
}

void OfiChannel::StartReceive(uint64_t tag, void* data, size_t capacity, bool up_to,
                              RequestPtr request) {
  if (failed_) {
    request->Complete(status());
    return;
  }
  if (tag < floor_) {
    request->Complete(floor_why_);
    return;
  }
  endpoint_->Start(
      address_, {data, capacity, FI_RECV},
      [this, tag, data, capacity, up_to, request](void* context, void* descriptor) {
        receives_[context] = Receive{tag, capacity, up_to, request, absl::OkStatus()};
        const ssize_t r =
            fi_trecv(endpoint_->ep(), data, capacity, descriptor, address_, tag, 0, context);
        if (r != 0) receives_.erase(context);
        return r;
      },
      [self = shared_from_this(), request](void* context, int error, size_t length, size_t sent) {
        auto it = self->receives_.find(context);
        if (it == self->receives_.end()) {
          // Never posted: the call itself failed, or the link failed while it was held back.
          request->Complete(self->failed_ ? self->status()
                                          : self->Error(absl::StrFormat("receive failed: %s",
                                                                        fi_strerror(error))));
          return;
        }
        const Receive receive = std::move(it->second);
        self->receives_.erase(it);
        self->OnReceived(receive, error, length, sent);
      });
}

void OfiChannel::OnReceived(const Receive& receive, int error, size_t length, size_t sent) {
  if (error == FI_ECANCELED || (error != 0 && !receive.cancelled.ok())) {
    receive.request->Complete(!receive.cancelled.ok() ? receive.cancelled : status());
    return;
  }
  const bool truncated = error == FI_ETRUNC;
  if (error != 0 && !truncated) {
    const absl::Status why = Error(absl::StrFormat("receive failed: %s", fi_strerror(error)));
    Fail(why, /*tell_peer=*/false, /*notify=*/true);
    receive.request->Complete(status());
    return;
  }
  if (truncated || sent != length || (!receive.up_to && sent != receive.capacity)) {
    const absl::Status why = Error(absl::StrFormat(
        "message size mismatch for tag %#x: the peer sent %d bytes, the receive expects %s%d",
        receive.tag, sent, receive.up_to ? "at most " : "", receive.capacity));
    Fail(why, /*tell_peer=*/true, /*notify=*/true);
    receive.request->Complete(why);
    return;
  }
  CountReceived(length);
  receive.request->Complete(absl::OkStatus(), length);
}

void OfiChannel::CancelReceivesBelow(uint64_t floor, const absl::Status& why) {
  for (auto& [context, receive] : receives_) {
    if (receive.tag >= floor || !receive.cancelled.ok()) continue;
    receive.cancelled = why;
    endpoint_->Cancel(context);
  }
}

void OfiChannel::Drain(uint64_t tag, uint64_t ignore, uint64_t generation) {
  if (generation != drain_generation_) return;
  if (drain_scratch_.empty()) drain_scratch_.resize(endpoint_->eager_limit());
  endpoint_->Start(
      address_, {drain_scratch_.data(), drain_scratch_.size(), FI_RECV},
      [this, tag, ignore](void* context, void* descriptor) {
        drains_.insert(context);
        const ssize_t r = fi_trecv(endpoint_->ep(), drain_scratch_.data(), drain_scratch_.size(),
                                   descriptor, address_, tag, ignore, context);
        if (r != 0) drains_.erase(context);
        return r;
      },
      // Every message it takes is truncated to nothing (FI_ETRUNC): dropped, as meant.
      [self = shared_from_this(), tag, ignore, generation](void* context, int error, size_t,
                                                           size_t) {
        self->drains_.erase(context);
        // A message taken (whole or truncated): drain the next. Cancelled, or an error that would
        // repeat: stop.
        if (error == 0 || error == FI_ETRUNC) self->Drain(tag, ignore, generation);
      });
}

void OfiChannel::DiscardTagsBelow(uint64_t floor, const absl::Status& why) {
  endpoint_->thread().Post([self = shared_from_this(), floor, why] {
    if (floor <= self->floor_ || self->failed_) return;
    self->floor_ = floor;
    self->floor_why_ = why;
    self->CancelReceivesBelow(floor, why);
    // [0, floor) as blocks: for each bit i set in floor, the tags that share floor's bits above
    // i and have 0 at i (ignore the bits below i).
    for (void* drain : std::set<void*>(self->drains_)) self->endpoint_->Cancel(drain);
    const uint64_t generation = ++self->drain_generation_;
    for (int bit = 63; bit >= 0; --bit) {
      if ((floor >> bit & 1) == 0) continue;
      const uint64_t below = bit == 63 ? 0 : floor >> (bit + 1) << (bit + 1);
      const uint64_t ignore = bit == 0 ? 0 : (uint64_t{1} << bit) - 1;
      self->Drain(below, ignore, generation);
    }
  });
}

void OfiChannel::SendControl(ControlMessage type, const std::vector<uint8_t>& payload,
                             std::function<void(int error)> sent) {
  if (address_ == FI_ADDR_UNSPEC) return;
  const OfiControlHeader header{self_rank_, static_cast<uint8_t>(type), {}};
  auto message = std::make_shared<std::vector<uint8_t>>(sizeof(header) + payload.size());
  std::memcpy(message->data(), &header, sizeof(header));
  if (!payload.empty()) {
    std::memcpy(message->data() + sizeof(header), payload.data(), payload.size());
  }
  endpoint_->Start(
      address_, {message->data(), message->size(), FI_SEND},
      [this, message](void* context, void* descriptor) {
        return fi_send(endpoint_->ep(), message->data(), message->size(), descriptor, address_,
                       context);
      },
      // The buffer lives until here.
      [message, sent = std::move(sent)](void*, int error, size_t, size_t) {
        if (sent) sent(error);
      });
}

void OfiChannel::OnReady() {
  if (ready_done_ || failed_) return;
  ready_done_ = true;
  ready_->Complete(absl::OkStatus());
  std::vector<std::function<void()>> sends = std::move(before_ready_);
  for (auto& send : sends) send();
}

void OfiChannel::Fail(const absl::Status& why, bool tell_peer, bool notify) {
  if (failed_) return;
  failed_ = true;
  SetStatus(why);
  // What the provider refused for now may never go (a dead peer's connection): its requests end
  // with `why` (the sends' and receives' done callbacks read it from status()). Before the
  // goodbye, which would otherwise queue behind them.
  endpoint_->AbandonHeldBack(address_);
  if (tell_peer) {
    const std::string reason(why.message().substr(0, kMaxLeaveReasonBytes));
    Leave(reason);
    WatchHeldSends(reason, kHeldSendsChecks);
  }
  CancelReceivesBelow(kEveryTag, why);
  for (void* drain : std::set<void*>(drains_)) endpoint_->Cancel(drain);
  std::vector<std::function<void()>> sends = std::move(before_ready_);
  for (auto& send : sends) send();  // Each fails with `why`.
  ready_->Complete(why);            // Ignored where the handshake had finished.
  if (notify) on_failure_(peer_rank_, why);
  // The connection broke, or the peer closed the link or refused this rank: nobody will take the
  // sends the provider still holds (rxm completes a rendezvous send only once its receiver reads
  // it). A failed link takes nothing more from its peer either, for the same reason the other
  // way: it posts no receive, and no drain, that could take a message of a peer whose connection
  // closed, which rxm (libfabric 1.17) would read through a null endpoint (SIGSEGV).
  if (!tell_peer && notify) ReleaseSends();
}

void OfiChannel::Leave(const std::string& reason) {
  leave_pending_ = true;
  SendControl(ControlMessage::kLeave, StringsPayload({reason}),
              [self = shared_from_this()](int error) {
                self->leave_pending_ = false;
                if (error != 0) self->ReleaseSends();
              });
}

void OfiChannel::WatchHeldSends(const std::string& reason, int checks_left) {
  if (sends_.empty()) return;
  if (endpoint_->RefusedFor(address_) >= kUnreachableAfter) {
    // What is held back (the goodbye) would never go; the sends end here, whichever op it was.
    endpoint_->AbandonHeldBack(address_);
    ReleaseSends();
    return;
  }
  if (checks_left == 0) return;
  if (!leave_pending_) Leave(reason);
  endpoint_->thread().PostAfter(kHeldSendsCheckEvery,
                                [self = shared_from_this(), reason, checks_left] {
                                  self->WatchHeldSends(reason, checks_left - 1);
                                });
}

void OfiChannel::ReleaseSends() {
  std::map<void*, RequestPtr> released;
  released.swap(sends_);
  for (auto& [context, request] : released) request->Complete(status());
}

void OfiChannel::OnGoodbye() {
  // Control messages travel apart from tagged ones, so data the peer sent before its goodbye may
  // still arrive: receives stay posted. For the same reason this side does not answer before its
  // own shutdown: the answer would let the peer close its endpoint while what it sent may still
  // be on its way here. So a peer that leaves alone waits out its shutdown's deadline.
  got_goodbye_ = true;
}

}  // namespace hmc
