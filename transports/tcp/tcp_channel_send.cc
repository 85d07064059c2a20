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

void TcpChannel::DoSend(uint64_t tag, const uint8_t* data, uint64_t bytes, bool may_pull,
                        RequestPtr request) {
  if (failed_ || shutting_down_) {
    request->Complete(failed_        ? status()
                      : peer_closed_ ? Error("the peer closed the channel")
                                     : Error("channel is shutting down"));
    return;
  }
  if (Stale(tag)) {
    request->Complete(discard_why_);
    return;
  }
  const bool all_local = local();
  if (may_pull && all_local && !pull_refused_ && !peer_closed_ && limits_.pull_min_bytes > 0 &&
      bytes >= limits_.pull_min_bytes) {
    auto op = std::make_shared<SendOp>();
    op->request = std::move(request);
    PullSend& send = pull_sends_[tag] = PullSend{op, data, bytes, RegisterPull(tag, data, bytes)};
    SendControl(FrameType::kRendezvous, tag, bytes, OfferOf(*send.registration).Serialize());
    return;
  }
  SendStreamed(tag, data, bytes, std::move(request));
}

void TcpChannel::SendStreamed(uint64_t tag, const uint8_t* data, uint64_t bytes,
                              RequestPtr request) {
  const int spread = streams_for(bytes);
  const uint16_t stripes =
      StripeCount(bytes, spread, stripe_min_bytes_.load(std::memory_order_relaxed));
  auto op = std::make_shared<SendOp>();
  op->request = std::move(request);
  op->stripes_left = stripes;
  for (uint16_t k = 0; k < stripes; ++k) {
    const StripeRange range = StripeOf(bytes, stripes, k);
    OutFrame frame;
    FrameHeader header;
    header.type = FrameType::kData;
    header.tag = tag;
    header.epoch = limits_.epoch;
    header.stripe = k;
    header.stripes = stripes;
    header.total_bytes = bytes;
    header.payload_bytes = range.bytes;
    EncodeFrameHeader(header, frame.header);
    frame.tag = tag;
    frame.abandonable = true;
    frame.data = data + range.offset;
    frame.bytes = range.bytes;
    frame.spread = spread;
    frame.op = op;
    unassigned_.push_back(std::move(frame));
  }
  // Streams that have handed everything to the kernel take the new stripes now; the others take
  // theirs when their socket drains.
  for (auto& stream : streams_) {
    if (unassigned_.empty() || failed_) return;
    if (stream->queue.empty() && stream->fd.valid()) Write(*stream);
  }
}

bool TcpChannel::WantsStripe(const Stream& s) const {
  return s.queue.empty() && !unassigned_.empty() && !s.said_goodbye && s.fd.valid() &&
         s.index < unassigned_.front().spread;
}

void TcpChannel::Pace(Stream& s, int spread) {
  if (s.local) return;
  const uint64_t rate = pacing_bytes_per_s_.load(std::memory_order_relaxed);
  const uint64_t part =
      rate == 0 ? kUnpaced
                : std::clamp<uint64_t>(rate / static_cast<uint64_t>(spread), 1, kUnpaced - 1);
  if (part == s.pacing) return;
  const auto value = static_cast<uint32_t>(part);
  if (setsockopt(s.fd.get(), SOL_SOCKET, SO_MAX_PACING_RATE, &value, sizeof(value)) == 0) {
    s.pacing = part;
  }
}

void TcpChannel::BoundUnsent(Stream& s) {
  if (s.local || limits_.unsent_ms <= 0) return;
  tcp_info info{};
  socklen_t length = sizeof(info);
  double bytes_per_ms = 0;  // What the connection sends per millisecond: its window per round
                            // trip, or its pacing rate where that is lower.
  if (getsockopt(s.fd.get(), IPPROTO_TCP, TCP_INFO, &info, &length) == 0 && info.tcpi_rtt > 0) {
    bytes_per_ms = 1000.0 * info.tcpi_snd_cwnd * info.tcpi_snd_mss / info.tcpi_rtt;
    const int64_t shortest = shortest_rtt_us_.load(std::memory_order_relaxed);
    if (shortest == 0 || info.tcpi_rtt < shortest) {
      shortest_rtt_us_.store(info.tcpi_rtt, std::memory_order_relaxed);
    }
  }
  if (s.pacing != kUnpaced) bytes_per_ms = std::min(bytes_per_ms, s.pacing / 1000.0);
  const int bound = static_cast<int>(std::clamp(bytes_per_ms * limits_.unsent_ms,
                                                double{kMinUnsentBytes}, double{kMaxUnsentBytes}));
  // Only a real change is worth a system call: the window moves a little with every ack.
  if (bound > s.unsent_bound / 2 * 3 || bound < s.unsent_bound / 3 * 2) {
    if (setsockopt(s.fd.get(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &bound, sizeof(bound)) == 0) {
      s.unsent_bound = bound;
    }
  }
}

bool TcpChannel::TakeStripe(Stream& s) {
  if (!WantsStripe(s)) return false;
  Pace(s, unassigned_.front().spread);
  BoundUnsent(s);
  s.queue.push_back(std::move(unassigned_.front()));
  unassigned_.pop_front();
  return true;
}

void TcpChannel::Seal(Stream& s, OutFrame& f) {
  f.sealed = true;
  if (s.send_seal == nullptr) return;
  s.send_seal->Begin();
  s.send_seal->Update(f.header);
  s.send_seal->Update(std::span<const uint8_t>(f.data, f.bytes));
  s.send_seal->Finish(std::span<uint8_t>(f.trailer, s.trailer_bytes));
}

void TcpChannel::Write(Stream& s) {
  constexpr int kMaxIov = 64;
  if (!s.ready) return;
  if (s.io->pending_output()) {
    IoResult flushed = s.io->Flush();
    if (flushed.kind == IoResult::kFailed) {
      LinkLost(s, absl::StrFormat("send failed: %s", flushed.error), /*read_side_closed=*/false);
      return;
    }
  }
  const uint64_t trailer = s.trailer_bytes;
  // One stripe per turn: streams that are all writable at once (after a burst of sends) share
  // the stripes, instead of the first one to run filling its buffer with them.
  bool took_stripe = false;
  while (!s.io->pending_output() &&
         (!s.queue.empty() || (!took_stripe && (took_stripe = TakeStripe(s))))) {
    iovec iov[kMaxIov];
    int n = 0;
    for (auto it = s.queue.begin(); it != s.queue.end() && n + 3 <= kMaxIov; ++it) {
      if (!it->sealed) Seal(s, *it);
      uint64_t skip = it->written;
      auto add = [&](const uint8_t* part, uint64_t length) {
        if (skip >= length) {
          skip -= length;
          return;
        }
        iov[n++] = iovec{const_cast<uint8_t*>(part) + skip, length - skip};
        skip = 0;
      };
      add(it->header, kFrameHeaderBytes);
      add(it->data, it->bytes);
      add(it->trailer, trailer);
    }
    const IoResult sent = s.io->Write(std::span<const iovec>(iov, n));
    if (sent.kind == IoResult::kWouldBlock) break;
    if (sent.kind != IoResult::kDone) {
      LinkLost(s, absl::StrFormat("send failed: %s", sent.error), /*read_side_closed=*/false);
      return;
    }
    uint64_t left = sent.bytes;
    while (!s.queue.empty()) {
      OutFrame& f = s.queue.front();
      const uint64_t length = kFrameHeaderBytes + f.bytes + trailer;
      const uint64_t take = std::min(length - f.written, left);
      f.written += take;
      left -= take;
      if (f.written < length) break;
      if (f.op != nullptr) counters_.AddSent(f.bytes, 0);
      if (f.op != nullptr && --f.op->stripes_left == 0) {
        counters_.AddSent(0, 1);
        f.op->request->Complete(f.op->outcome);
      }
      s.queue.pop_front();
    }
  }
  if (s.queue.empty() && s.said_goodbye && !s.io->pending_output() && !s.wrote_end) {
    shutdown(s.fd.get(), SHUT_WR);
    s.wrote_end = true;
  }
  UpdateInterest(s);
}

}  // namespace hmc
