#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "core/frame_io.h"
#include "core/log.h"
#include "transports/tcp/cma.h"
#include "transports/tcp/stripe.h"
#include "transports/tcp/tcp_channel.h"
#include "transports/tcp/tcp_channel_parts.h"
#include "transports/tcp/tcp_loop.h"

namespace hmc {

void TcpChannel::Close(const absl::Status& why) {
  loop_->Post([self = shared_from_this(), why] { self->CloseWithNotice(why); });
}

void TcpChannel::CloseWithNotice(const absl::Status& why) {
  if (failed_) return;
  // Tell the peer why before closing, on every stream that is not in the middle of a frame, so
  // that it reports the original cause rather than "connection closed". Best effort: the frame
  // is small, and a stream whose buffer is full gets a short deadline.
  const std::string reason(why.message());
  const std::vector<uint8_t> notice = EncodeControlFrame(
      FrameType::kLeave,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(reason.data()),
                               std::min<size_t>(reason.size(), kMaxLeaveReasonBytes)),
      limits_.epoch);
  for (auto& stream : streams_) {
    Stream& s = *stream;
    if (!s.fd.valid() || !s.ready || (!s.queue.empty() && s.queue.front().sealed)) continue;
    WriteNotice(s, notice);
  }
  Fail(why, /*notify=*/false);
}

void TcpChannel::WriteNotice(Stream& s, const std::vector<uint8_t>& frame) {
  std::vector<uint8_t> sealed = frame;
  if (s.send_seal != nullptr) s.send_seal->Append(sealed);
  s.io->WriteAll(sealed, absl::Now() + absl::Milliseconds(200)).IgnoreError();
}

void TcpChannel::SendControl(FrameType type, uint64_t tag, uint64_t total_bytes,
                             std::vector<uint8_t> payload) {
  if (shutting_down_) return;  // The goodbyes are queued: nothing goes after them.
  Stream& s = *streams_[next_stream_++ % streams_.size()];
  OutFrame frame;
  FrameHeader header;
  header.type = type;
  header.flags = kFlagPayloadChecksum;
  header.tag = tag;
  header.epoch = limits_.epoch;
  header.total_bytes = std::max<uint64_t>(total_bytes, payload.size());
  header.payload_bytes = payload.size();
  header.payload_crc = Checksum(payload);
  EncodeFrameHeader(header, frame.header);
  frame.tag = tag;
  frame.abandonable = type == FrameType::kRendezvous;
  frame.owned = std::move(payload);
  frame.data = frame.owned.data();
  frame.bytes = frame.owned.size();
  s.queue.push_back(std::move(frame));
  if (s.queue.size() == 1 && s.fd.valid()) Write(s);
}

void TcpChannel::LinkLost(Stream& s, const std::string& cause, bool read_side_closed) {
  if (read_side_closed) s.eof = true;
  if (draining_) return;  // The outer call decides.
  // A peer that closes on purpose first sends a close notice with its reason, possibly on
  // another stream: read everything still readable so that the cause wins over its symptom.
  draining_ = true;
  for (auto& other : streams_) {
    if (other->fd.valid() && !other->eof && !failed_) Read(*other);
  }
  draining_ = false;
  if (!failed_) Fail(Error(cause), /*notify=*/true);
}

void TcpChannel::FailOnControl(const Stream& s, absl::string_view what) {
  Fail(Error(absl::StrFormat(
           "%s (%d bytes: %s)", what, s.control.size(),
           absl::BytesToHexString(std::string(s.control.begin(), s.control.end())))),
       /*notify=*/true);
}

void TcpChannel::OnControlFrame(Stream& s) {
  const FrameHeader& h = s.header;
  if (absl::Status c = CheckPayload(h, s.control); !c.ok()) {
    Fail(Error(c.message()), /*notify=*/true);
    return;
  }
  switch (h.type) {
    case FrameType::kLeave:
      Fail(Error(absl::StrFormat("closed the link: %s",
                                 std::string(s.control.begin(), s.control.end()))),
           /*notify=*/true);
      return;
    case FrameType::kRendezvous: {
      if (Stale(h.tag)) {
        SendControl(FrameType::kRendezvousDone, h.tag, 0, {kRendezvousDropped});
        return;
      }
      auto it = incoming_.find(h.tag);
      if (it == incoming_.end()) {
        pull_offers_[h.tag] = {h.total_bytes, s.control};  // Pulled when the receive is posted.
        return;
      }
      Incoming& in = *it->second;
      if (in.request == nullptr || in.stripes != 0) {
        Fail(Error(absl::StrFormat("unexpected offer to pull tag %#x", h.tag)), /*notify=*/true);
        return;
      }
      if (!AcceptLength(in, h.tag, h.total_bytes)) return;
      Pull(h.tag, s.control);
      return;
    }
    case FrameType::kRendezvousDone: {
      auto it = pull_sends_.find(h.tag);
      if (it == pull_sends_.end() || s.control.size() != 1) {
        Fail(Error(absl::StrFormat("unexpected rendezvous answer for tag %#x", h.tag)),
             /*notify=*/true);
        return;
      }
      PullSend send = std::move(it->second);
      pull_sends_.erase(it);
      if (s.control[0] == kRendezvousDropped) {
        send.op->request->Complete(
            Stale(h.tag) ? discard_why_
                         : Error("the peer dropped the message: its call was abandoned"));
      } else if (s.control[0] == 1) {
        counters_.AddSent(send.bytes, 1);
        send.op->request->Complete(absl::OkStatus());
      } else {
        pull_refused_ = true;  // The peer cannot read this process: stream from now on.
        SendStreamed(h.tag, send.data, send.bytes, send.op->request);
      }
      return;
    }
    case FrameType::kStreamsWanted: {
      if (s.control.size() != 2 || s.control[0] >= kSizeClasses || s.control[1] < 1 ||
          s.control[1] > limits_.streams) {
        FailOnControl(s, "a request for streams that cannot be met");
        return;
      }
      class_streams_[s.control[0]].store(s.control[1], std::memory_order_relaxed);
      return;
    }
    case FrameType::kStreamHold: {
      if (s.control.size() != 2 || s.control[0] >= limits_.streams || s.control[1] > 1) {
        FailOnControl(s, "a hold of a stream that it does not have");
        return;
      }
      const Stream& held = *streams_[s.control[0]];
      if (held.local || !held.fd.valid() || limits_.liveness_timeout <= absl::ZeroDuration())
        return;
      SetUnacknowledgedTimeout(held.fd.get(),
                               s.control[1] == 1 ? absl::ZeroDuration() : limits_.liveness_timeout)
          .IgnoreError();  // Best effort, as at attach.
      return;
    }
    default:
      return;
  }
}

void TcpChannel::PeerClosed() {
  // The peer said goodbye and ended its side of every stream: everything it will ever send has
  // arrived. Messages complete in memory stay deliverable; receives that nothing can satisfy any
  // more fail, and so do offers to pull that it can no longer answer. Its read side is still
  // open (it waits for our goodbye), so what is queued goes on; sends posted later fail.
  peer_closed_ = true;
  const absl::Status why = Error("the peer closed the channel");
  for (auto it = incoming_.begin(); it != incoming_.end();) {
    Incoming& in = *it->second;
    if (in.stripes != 0 && in.stripes_done == in.stripes) {
      ++it;
      continue;
    }
    if (in.request != nullptr) in.request->Complete(why);
    if (!in.storage.empty()) loop_->ReleaseUnexpected(in.total);
    it = incoming_.erase(it);
  }
  for (auto& [tag, send] : pull_sends_) send.op->request->Complete(why);
  pull_sends_.clear();
  pull_offers_.clear();
  // The peer waits for this side's goodbye before it closes (a close with unread data would reset
  // the link): answer now, behind what is queued, instead of at this side's own shutdown.
  BeginShutdown();
}

void TcpChannel::Fail(const absl::Status& why, bool notify) {
  if (failed_) return;
  failed_ = true;
  {
    MutexLock lock(&mu_);
    status_ = why;
  }
  for (auto& stream : streams_) {
    for (OutFrame& f : stream->queue) {
      if (f.op != nullptr) f.op->request->Complete(why);
    }
    stream->queue.clear();
    Unwatch(*stream);
  }
  for (OutFrame& f : unassigned_) f.op->request->Complete(why);
  unassigned_.clear();
  for (auto& [tag, in] : incoming_) {
    if (in->request != nullptr) in->request->Complete(why);
    if (!in->storage.empty()) loop_->ReleaseUnexpected(in->total);
  }
  incoming_.clear();
  for (auto& [tag, send] : pull_sends_) send.op->request->Complete(why);
  pull_sends_.clear();
  pull_offers_.clear();
  if (notify) loop_->OnChannelFailed(peer_rank_, why);
}

void TcpChannel::BeginShutdown() {
  shutting_down_ = true;
  if (failed_) return;
  // No send comes after this: every stripe still unassigned goes ahead of the goodbyes.
  std::vector<Stream*> open;
  for (auto& stream : streams_) {
    if (stream->fd.valid() && !stream->said_goodbye) open.push_back(stream.get());
  }
  for (size_t k = 0; !open.empty() && !unassigned_.empty(); ++k) {
    open[k % open.size()]->queue.push_back(std::move(unassigned_.front()));
    unassigned_.pop_front();
  }
  for (auto& stream : streams_) {
    Stream& s = *stream;
    if (!s.fd.valid() || s.said_goodbye) continue;
    s.said_goodbye = true;
    OutFrame goodbye;
    FrameHeader header;
    header.type = FrameType::kLeave;
    header.epoch = limits_.epoch;
    EncodeFrameHeader(header, goodbye.header);
    s.queue.push_back(std::move(goodbye));
    Write(s);
    if (failed_) return;
  }
}

bool TcpChannel::shutdown_complete() const {
  if (failed_) return true;
  for (const auto& s : streams_) {
    if (s->fd.valid() && (!s->queue.empty() || !s->eof)) return false;
  }
  return true;
}

void TcpChannel::DiscardTagsBelow(uint64_t floor, const absl::Status& why) {
  loop_->Post([self = shared_from_this(), floor, why] { self->DoDiscard(floor, why); });
}

void TcpChannel::DoDiscard(uint64_t floor, const absl::Status& why) {
  if (floor <= discard_floor_) return;
  discard_floor_ = floor;
  discard_why_ = why;
  if (failed_) return;
  // A send completes once none of its stripes is being written: stripes not yet begun are dropped,
  // those half on the wire finish (the receiver drops them), and then the request fails.
  auto drop = [&](OutFrame& f) {
    if (!f.abandonable || !Stale(f.tag) || f.sealed) return false;
    if (f.op != nullptr) {
      f.op->outcome = why;
      if (--f.op->stripes_left == 0) f.op->request->Complete(why);
    } else if (auto send = pull_sends_.find(f.tag); send != pull_sends_.end()) {
      send->second.op->request->Complete(why);  // Its offer never left.
      pull_sends_.erase(send);
    }
    return true;
  };
  std::erase_if(unassigned_, drop);
  for (auto& stream : streams_) std::erase_if(stream->queue, drop);
  // Offers already made stay until the peer answers: it may be reading this memory right now.
  for (auto it = pull_offers_.begin(); it != pull_offers_.end();) {
    if (!Stale(it->first)) break;  // Ordered by tag.
    SendControl(FrameType::kRendezvousDone, it->first, 0, {kRendezvousDropped});
    if (failed_) return;
    it = pull_offers_.erase(it);
  }
  for (auto it = incoming_.begin(); it != incoming_.end() && Stale(it->first);) {
    for (auto& stream : streams_) {
      Stream& s = *stream;
      // The rest of this stripe goes nowhere; one whose payload is all read still waits for its
      // seal, which is read and checked before the stream moves on (FinishStripe then must not
      // look the message up).
      if (s.have_header && s.header.type == FrameType::kData && s.header.tag == it->first &&
          !s.paused) {
        s.discarding = true;
      }
    }
    Incoming& in = *it->second;
    if (in.request != nullptr) in.request->Complete(why);
    if (!in.storage.empty()) loop_->ReleaseUnexpected(in.total);
    it = incoming_.erase(it);
  }
  ResumePaused();  // A paused header may belong to an abandoned tag: it is read and dropped now.
}

}  // namespace hmc
