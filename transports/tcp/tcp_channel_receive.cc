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

bool TcpChannel::AcceptLength(Incoming& in, uint64_t tag, uint64_t sent) {
  if (in.up_to ? sent <= in.total : sent == in.total) {
    in.total = sent;
    in.up_to = false;
    return true;
  }
  Fail(Error(absl::StrFormat(
           "message size mismatch for tag %#x: the peer sent %d bytes, the receive expects %s%d",
           tag, sent, in.up_to ? "at most " : "", in.total)),
       /*notify=*/true);
  return false;
}

void TcpChannel::DoRecv(uint64_t tag, uint8_t* data, uint64_t bytes, bool up_to,
                        RequestPtr request) {
  if (failed_) {
    request->Complete(status());
    return;
  }
  if (Stale(tag)) {
    request->Complete(discard_why_);
    return;
  }
  if (auto offer = pull_offers_.find(tag); offer != pull_offers_.end()) {
    auto [offered_bytes, description] = std::move(offer->second);
    pull_offers_.erase(offer);
    auto in = std::make_unique<Incoming>();
    in->total = bytes;
    in->up_to = up_to;
    if (!AcceptLength(*in, tag, offered_bytes)) {
      request->Complete(status());
      return;
    }
    in->user = data;
    in->request = std::move(request);
    incoming_[tag] = std::move(in);
    Pull(tag, description);
    return;
  }
  if (peer_closed_ && incoming_.count(tag) == 0) {
    request->Complete(Error("the peer closed the channel"));
    return;
  }
  auto [it, inserted] = incoming_.try_emplace(tag);
  if (inserted) {
    it->second = std::make_unique<Incoming>();
    Incoming& in = *it->second;
    in.total = bytes;
    in.up_to = up_to;
    in.user = data;
    in.request = std::move(request);
    ResumePaused();  // A paused stream may hold this message's header.
    return;
  }
  Incoming& in = *it->second;
  if (in.request != nullptr) {
    request->Complete(absl::InvalidArgumentError(
        absl::StrFormat("%s: a receive with tag %#x is already pending", description_, tag)));
    return;
  }
  // The message arrived first: its length is known, the receive's is the limit.
  const uint64_t sent = in.total;
  in.total = bytes;
  in.up_to = up_to;
  if (!AcceptLength(in, tag, sent)) {
    request->Complete(status());
    return;
  }
  in.user = data;
  in.request = std::move(request);
  if (in.stripes != 0 && in.stripes_done == in.stripes) Complete(tag);
}

void TcpChannel::Complete(uint64_t tag) {
  // Every stripe arrived and a receive is posted.
  auto it = incoming_.find(tag);
  if (it == incoming_.end()) return;
  std::unique_ptr<Incoming> in = std::move(it->second);
  incoming_.erase(it);
  if (!in->storage.empty()) {
    std::memcpy(in->user, in->storage.data(), in->total);
    loop_->ReleaseUnexpected(in->total);
  }
  counters_.AddReceived(0, 1);
  in->request->Complete(absl::OkStatus(), in->total);
}

void TcpChannel::Read(Stream& s) {
  if (!s.ready) return;
  uint64_t budget = kReadBudgetBytes;
  while ((budget > 0 || s.io->buffered()) && !failed_ && !s.paused) {
    if (!s.have_header) {
      const ReadStep step = ReadHeader(s);
      if (step == ReadStep::kStop) return;
      if (step == ReadStep::kAgain) continue;
    }
    if (s.remaining > 0 && !ReadPayload(s, budget)) return;
    if (s.remaining > 0) continue;
    // Not yet there (or bad, and the channel failed): the socket says when more arrives.
    if (!ReadTrailer(s)) return;
    FinishStripe(s);
  }
}

TcpChannel::ReadStep TcpChannel::ReadHeader(Stream& s) {
  const IoResult r = s.io->Read(s.header_bytes + s.header_got, kFrameHeaderBytes - s.header_got);
  if (r.kind == IoResult::kWouldBlock) return ReadStep::kStop;
  if (r.kind != IoResult::kDone) {
    const std::string cause = r.kind == IoResult::kClosed ? "connection closed by peer" : r.error;
    if (s.got_goodbye || shutting_down_) {
      s.eof = true;
      UpdateInterest(s);
      bool all_closed = true;
      for (const auto& other : streams_) all_closed = all_closed && other->eof;
      if (all_closed && !shutting_down_) PeerClosed();
      return ReadStep::kStop;
    }
    LinkLost(s, s.header_got > 0 ? absl::StrFormat("%s inside a frame header", cause) : cause,
             /*read_side_closed=*/true);
    return ReadStep::kStop;
  }
  s.header_got += r.bytes;
  if (s.header_got < kFrameHeaderBytes) return ReadStep::kAgain;
  absl::StatusOr<FrameHeader> header = DecodeFrameHeader(s.header_bytes, limits_.max_frame_bytes);
  if (!header.ok()) {
    Fail(Error(header.status().message()), /*notify=*/true);
    return ReadStep::kStop;
  }
  if (header->epoch != limits_.epoch) {
    Fail(Error(absl::StrFormat("frame of epoch %d, expected %d", header->epoch, limits_.epoch)),
         /*notify=*/true);
    return ReadStep::kStop;
  }
  if (s.receive_seal != nullptr) {
    s.receive_seal->Begin();
    s.receive_seal->Update(s.header_bytes);
  }
  s.header = *header;
  s.have_header = true;
  return BeginPayload(s) ? ReadStep::kPayload : ReadStep::kStop;
}

bool TcpChannel::BeginPayload(Stream& s) {
  const FrameHeader& header = s.header;
  if (header.type == FrameType::kLeave && header.payload_bytes == 0) {
    s.remaining = 0;  // A goodbye: handled once its trailer checks out.
    return true;
  }
  if (header.type == FrameType::kData) return Route(s);
  if (header.type == FrameType::kLeave || header.type == FrameType::kRendezvous ||
      header.type == FrameType::kRendezvousDone || header.type == FrameType::kStreamsWanted ||
      header.type == FrameType::kStreamHold) {
    // A small control frame: its payload is read like data, then handled in FinishStripe.
    if (header.payload_bytes > kMaxControlOnDataStream) {
      Fail(Error(absl::StrFormat("oversized %s frame", FrameTypeName(header.type))),
           /*notify=*/true);
      return false;
    }
    s.control.resize(header.payload_bytes);
    s.dest = s.control.data();
    s.remaining = header.payload_bytes;
    return true;
  }
  Fail(Error(absl::StrFormat("unexpected %s frame on a data stream", FrameTypeName(header.type))),
       /*notify=*/true);
  return false;
}

bool TcpChannel::ReadPayload(Stream& s, uint64_t& budget) {
  if (s.discarding && discard_sink_.empty()) discard_sink_.resize(64 << 10);
  uint8_t* to = s.discarding ? discard_sink_.data() : s.dest;
  uint64_t want = std::min(s.remaining, std::max<uint64_t>(budget, 64 << 10));
  if (s.discarding) want = std::min<uint64_t>(want, discard_sink_.size());
  const IoResult r = s.io->Read(to, want);
  if (r.kind == IoResult::kWouldBlock) return false;
  if (r.kind != IoResult::kDone) {
    LinkLost(s,
             absl::StrFormat("%s inside a %d-byte frame (%d bytes missing)",
                             r.kind == IoResult::kClosed ? "connection closed by peer" : r.error,
                             s.header.payload_bytes, s.remaining),
             /*read_side_closed=*/true);
    return false;
  }
  if (s.receive_seal != nullptr) s.receive_seal->Update(std::span<const uint8_t>(to, r.bytes));
  if (!s.discarding) s.dest += r.bytes;
  s.remaining -= r.bytes;
  budget -= std::min<uint64_t>(budget, r.bytes);
  if (s.header.type == FrameType::kData) counters_.AddReceived(r.bytes, 0);
  return true;
}

bool TcpChannel::ReadTrailer(Stream& s) {
  while (s.trailer_got < s.trailer_bytes) {
    const IoResult r = s.io->Read(s.trailer + s.trailer_got, s.trailer_bytes - s.trailer_got);
    if (r.kind == IoResult::kWouldBlock) return false;
    if (r.kind != IoResult::kDone) {
      LinkLost(s,
               absl::StrFormat("%s inside a frame's seal",
                               r.kind == IoResult::kClosed ? "connection closed by peer" : r.error),
               /*read_side_closed=*/true);
      return false;
    }
    s.trailer_got += r.bytes;
  }
  if (s.receive_seal != nullptr &&
      !s.receive_seal->Verify(std::span<const uint8_t>(s.trailer, s.trailer_bytes))) {
    Fail(Error(absl::StrFormat(
             "stream %d: a %s frame (tag %#x) failed its integrity check (%s): it was changed "
             "on the way or forged",
             s.index, FrameTypeName(s.header.type), s.header.tag,
             FrameIntegrityName(s.receive_seal->integrity()))),
         /*notify=*/true);
    return false;
  }
  return true;
}

bool TcpChannel::Route(Stream& s) {
  const FrameHeader& h = s.header;
  if (Stale(h.tag)) {  // Read and dropped: nobody will ever receive it.
    s.discarding = true;
    s.remaining = h.payload_bytes;
    return true;
  }
  if (h.stripes > kMaxStripes ||
      absl::uint128(h.total_bytes) > absl::uint128(h.stripes) * limits_.max_frame_bytes) {
    Fail(Error(absl::StrFormat("a %d-byte message in %d stripes exceeds the limit of %d stripes "
                               "of at most %d bytes",
                               h.total_bytes, h.stripes, kMaxStripes, limits_.max_frame_bytes)),
         /*notify=*/true);
    return false;
  }
  const StripeRange range = StripeOf(h.total_bytes, h.stripes, h.stripe);
  if (range.bytes != h.payload_bytes) {
    Fail(Error(absl::StrFormat("stripe %d of %d carries %d bytes, expected %d", h.stripe, h.stripes,
                               h.payload_bytes, range.bytes)),
         /*notify=*/true);
    return false;
  }
  auto it = incoming_.find(h.tag);
  if (it == incoming_.end()) {
    // Nothing posted for it: buffered only within the unexpected-message budget. A message larger
    // than the whole budget waits for its receive and lands in the receiver's own buffer.
    if (!loop_->ReserveUnexpected(h.total_bytes)) {
      s.paused = true;  // Resumed when memory frees up or a receive is posted.
      UpdateInterest(s);
      TellHold(s, true);
      return false;
    }
    it = incoming_.emplace(h.tag, std::make_unique<Incoming>()).first;
    it->second->total = h.total_bytes;
    it->second->storage.resize(h.total_bytes);
  }
  Incoming& in = *it->second;
  if (in.stripes == 0 && !AcceptLength(in, h.tag, h.total_bytes)) return false;
  if (in.total != h.total_bytes) {
    Fail(Error(absl::StrFormat("stripes of tag %#x disagree on its length: %d and %d bytes", h.tag,
                               h.total_bytes, in.total)),
         /*notify=*/true);
    return false;
  }
  if ((in.stripes != 0 && in.stripes != h.stripes) || (in.stripe_mask >> h.stripe & 1) != 0) {
    Fail(Error(absl::StrFormat("inconsistent or repeated stripe %d of %d for tag %#x", h.stripe,
                               h.stripes, h.tag)),
         /*notify=*/true);
    return false;
  }
  if (in.stripes == 0) in.first_byte = absl::Now();
  in.stripes = h.stripes;
  in.stripe_mask |= uint64_t{1} << h.stripe;
  s.dest = in.dest() + range.offset;
  s.remaining = range.bytes;
  return true;
}

void TcpChannel::FinishStripe(Stream& s) {
  s.have_header = false;
  s.header_got = 0;
  s.trailer_got = 0;
  if (s.header.type == FrameType::kLeave && s.header.payload_bytes == 0) {
    s.got_goodbye = true;
    return;
  }
  if (s.header.type != FrameType::kData) {
    OnControlFrame(s);
    return;
  }
  if (s.discarding) {
    s.discarding = false;
    return;
  }
  Incoming& in = *incoming_.find(s.header.tag)->second;
  if (++in.stripes_done != in.stripes) return;
  if (adapter_.has_value() && !s.local) {
    const std::optional<StreamAdapter::Request> wanted =
        adapter_->Arrived(in.first_byte, absl::Now(), in.total, in.stripes, round_trip());
    if (wanted.has_value()) {
      SendControl(
          FrameType::kStreamsWanted, 0, 0,
          {static_cast<uint8_t>(wanted->size_class), static_cast<uint8_t>(wanted->streams)});
    }
  }
  if (in.request != nullptr) Complete(s.header.tag);
}

void TcpChannel::TellHold(Stream& s, bool held) {
  if (s.local || s.hold_told == held || failed_) return;  // Unix sockets have no user timeout.
  s.hold_told = held;
  SendControl(FrameType::kStreamHold, 0, 0,
              {static_cast<uint8_t>(s.index), static_cast<uint8_t>(held ? 1 : 0)});
}

void TcpChannel::ResumePaused() {
  for (auto& stream : streams_) {
    Stream& s = *stream;
    if (!s.paused || failed_) continue;
    s.paused = false;
    if (!Route(s)) continue;
    TellHold(s, false);
    UpdateInterest(s);
    Read(s);
  }
}

}  // namespace hmc
