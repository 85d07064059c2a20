#include "transports/tcp/tcp_channel.h"

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
#include "transports/tcp/tcp_loop.h"

namespace hmc {

namespace {
constexpr size_t kMaxLeaveReasonBytes = 4096;
constexpr uint64_t kMaxControlOnDataStream = 8192;
// The range of a stream's bound on unsent bytes: a floor for connections still opening their
// window or just back from idle (whose window says little of the rate to come), a ceiling at the
// kernel's default largest send buffer.
constexpr int kMinUnsentBytes = 64 << 10;
constexpr int kMaxUnsentBytes = 4 << 20;
// SO_MAX_PACING_RATE's value for no cap (the kernel's ~0U; the option takes 32 bits).
constexpr uint64_t kUnpaced = ~uint32_t{0};
// A rendezvous answer: the receiver neither pulled the message nor wants it streamed, because the
// call it belonged to was abandoned (DiscardTagsBelow). 0 and 1 mean streamed and pulled.
constexpr uint8_t kRendezvousDropped = 2;
}  // namespace

struct TcpChannel::SendOp {
  RequestPtr request;
  int stripes_left = 0;
  absl::Status outcome;  // What the request completes with once its last stripe is written.
};

struct TcpChannel::OutFrame {
  uint8_t header[kFrameHeaderBytes];
  uint64_t tag = 0;
  bool abandonable = false;  // A data stripe or a rendezvous offer: DiscardTagsBelow may drop it.
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;    // Payload bytes.
  int spread = 1;        // A data stripe: the streams its message is spread over (the first ones).
  uint64_t written = 0;  // Header, payload and trailer bytes written so far.
  bool sealed = false;   // Committed to its stream's sequence: it must go out.
  uint8_t trailer[kMaxSealBytes];
  std::shared_ptr<SendOp> op;  // Null for control frames.
  std::vector<uint8_t> owned;  // A control frame's payload (data points into it).
};

// A message being received: posted by Recv, or arrived first ("unexpected") into own storage.
struct TcpChannel::Incoming {
  uint64_t total = 0;
  bool up_to = false;        // Posted by RecvUpTo: `total` is a capacity until a length arrives.
  uint16_t stripes = 0;      // 0 until the first stripe header arrives.
  uint64_t stripe_mask = 0;  // Stripes whose header arrived.
  uint16_t stripes_done = 0;
  absl::Time first_byte;         // When the first stripe's header arrived.
  uint8_t* user = nullptr;       // Posted receive buffer.
  RequestPtr request;            // Null while nobody posted a receive.
  std::vector<uint8_t> storage;  // Unexpected arrival.
  uint8_t* dest() { return storage.empty() && total > 0 && user ? user : storage.data(); }
};

struct TcpChannel::Stream {
  int index = 0;
  UniqueFd fd;
  std::unique_ptr<StreamIo> io;
  bool ready = false;  // Its TLS handshake (if any) finished.
  std::unique_ptr<FrameSeal> send_seal;
  std::unique_ptr<FrameSeal> receive_seal;
  size_t trailer_bytes = 0;  // After every frame's payload, both ways.
  uint8_t trailer[kMaxSealBytes];
  size_t trailer_got = 0;
  TcpLoop::Target target;
  std::deque<OutFrame> queue;
  uint32_t interest = 0;
  // Receive state: a header being read, or a payload going to `dest`.
  uint8_t header_bytes[kFrameHeaderBytes];
  size_t header_got = 0;
  bool have_header = false;
  FrameHeader header;
  uint8_t* dest = nullptr;
  uint64_t remaining = 0;
  bool paused = false;           // A header waits for memory or a posted receive.
  bool said_goodbye = false;     // This side sent its goodbye and shut down writing.
  bool got_goodbye = false;      // The peer said goodbye.
  std::vector<uint8_t> control;  // The payload of a control frame being read.
  bool eof = false;
  bool discarding = false;     // The payload being read belongs to an abandoned tag.
  bool local = false;          // A Unix domain socket.
  int unsent_bound = 0;        // TCP_NOTSENT_LOWAT as last set; 0: not set.
  uint64_t pacing = kUnpaced;  // SO_MAX_PACING_RATE as last set, bytes/s.
};

TcpChannel::TcpChannel(int peer_rank, std::string description, const TcpLimits& limits,
                       TcpLoop* loop)
    : peer_rank_(peer_rank),
      description_(std::move(description)),
      limits_(limits),
      loop_(loop),
      active_streams_(limits.streams),
      stripe_min_bytes_(limits.stripe_min_bytes) {
  if (limits.adapt_streams) adapter_.emplace(limits.streams);
  for (int i = 0; i < limits.streams; ++i) {
    auto s = std::make_unique<Stream>();
    s->index = i;
    s->target = TcpLoop::Target{this, i};
    streams_.push_back(std::move(s));
  }
}

TcpChannel::~TcpChannel() = default;

void TcpChannel::SetActiveStreams(int streams) {
  active_streams_.store(std::clamp(streams, 1, limits_.streams), std::memory_order_relaxed);
}

int TcpChannel::streams_for(uint64_t bytes) const {
  const int size_class = SizeClassOf(bytes);
  const int asked = size_class < 0 ? 0 : class_streams_[size_class].load(std::memory_order_relaxed);
  return asked > 0 ? asked : active_streams_.load(std::memory_order_relaxed);
}

absl::Status TcpChannel::Error(absl::string_view what) const {
  return absl::UnavailableError(absl::StrFormat("%s: %s", description_, what));
}

RequestPtr TcpChannel::Send(uint64_t tag, const void* data, size_t bytes) {
  auto request = std::make_shared<Request>();
  loop_->Post([self = shared_from_this(), tag, data, bytes, request] {
    self->DoSend(tag, static_cast<const uint8_t*>(data), bytes, request);
  });
  return request;
}

RequestPtr TcpChannel::Recv(uint64_t tag, void* data, size_t bytes) {
  return PostRecv(tag, data, bytes, /*up_to=*/false);
}

RequestPtr TcpChannel::RecvUpTo(uint64_t tag, void* data, size_t capacity) {
  return PostRecv(tag, data, capacity, /*up_to=*/true);
}

RequestPtr TcpChannel::PostRecv(uint64_t tag, void* data, size_t bytes, bool up_to) {
  auto request = std::make_shared<Request>();
  loop_->Post([self = shared_from_this(), tag, data, bytes, up_to, request] {
    self->DoRecv(tag, static_cast<uint8_t*>(data), bytes, up_to, request);
  });
  return request;
}

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

absl::Status TcpChannel::status() const {
  MutexLock lock(&mu_);
  return status_;
}

LinkStats TcpChannel::stats() const {
  return LinkStats{bytes_sent_.load(), bytes_received_.load(), messages_sent_.load(),
                   messages_received_.load()};
}

absl::Status TcpChannel::CanAttach(int index) const {
  if (index < 0 || index >= static_cast<int>(streams_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("stream %d out of range (%d streams)", index, streams_.size()));
  }
  if (streams_[index]->fd.valid()) {
    return absl::AlreadyExistsError(absl::StrFormat("duplicate connection for stream %d", index));
  }
  if (failed_) return status();
  return absl::OkStatus();
}

absl::Status TcpChannel::AttachStream(int index, UniqueFd fd, bool local,
                                      StreamProtection protection) {
  if (absl::Status can = CanAttach(index); !can.ok()) return can;
  Stream& s = *streams_[index];
  s.io = protection.io != nullptr ? std::move(protection.io) : std::make_unique<SocketIo>(fd.get());
  if (protection.integrity != FrameIntegrity::kOff) {
    s.send_seal = std::make_unique<FrameSeal>(protection.integrity, protection.send_key);
    s.receive_seal = std::make_unique<FrameSeal>(protection.integrity, protection.receive_key);
    s.trailer_bytes = s.send_seal->trailer_bytes();
  }
  if (local) {
    // Pulls read the process the kernel says is at the other end; streams that disagree on it
    // (they cannot, unless a peer forwards them) turn pulls off.
    absl::StatusOr<PeerProcess> peer = PeerProcessOf(fd.get());
    if (!peer.ok() || (peer_process_.has_value() && peer_process_->pid != peer->pid)) {
      peer_process_unknown_ = true;
    } else {
      peer_process_ = *peer;
    }
  }
  s.fd = std::move(fd);
  if (local) local_streams_.fetch_add(1);
  s.local = local;
  if (!local && limits_.liveness_timeout > absl::ZeroDuration()) {
    SetLiveness(s.fd.get(), limits_.liveness_timeout).IgnoreError();  // Best effort.
  }
  BoundUnsent(s);
  s.interest = EPOLLIN;
  loop_->Watch(s.fd.get(), &s.target, s.interest);
  ++attached_;
  if (Ready(s)) Write(s);
  return absl::OkStatus();
}

bool TcpChannel::Ready(Stream& s) {
  if (s.ready) return true;
  absl::StatusOr<uint32_t> wants = s.io->Handshake();
  if (!wants.ok()) {
    Fail(Error(absl::StrFormat("stream %d: %s", s.index, wants.status().message())),
         /*notify=*/true);
    return false;
  }
  if (*wants != 0) {
    if (*wants != s.interest) {
      s.interest = *wants;
      loop_->Modify(s.fd.get(), &s.target, s.interest);
    }
    return false;
  }
  s.ready = true;
  if (!logged_protection_ && s.io->protection() != "none") {
    logged_protection_ = true;
    Logf("tcp", "%s: %s", description_, s.io->protection());
  }
  UpdateInterest(s);
  return true;
}

void TcpChannel::DoSend(uint64_t tag, const uint8_t* data, uint64_t bytes, RequestPtr request) {
  if (failed_ || shutting_down_) {
    request->Complete(failed_ ? status() : Error("channel is shutting down"));
    return;
  }
  if (Stale(tag)) {
    request->Complete(discard_why_);
    return;
  }
  const bool all_local = local();
  if (all_local && !pull_refused_ && !peer_closed_ && limits_.pull_min_bytes > 0 &&
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

void TcpChannel::SendControl(FrameType type, uint64_t tag, uint64_t total_bytes,
                             std::vector<uint8_t> payload) {
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

void TcpChannel::Pull(uint64_t tag, const std::vector<uint8_t>& description) {
  Incoming& in = *incoming_[tag];
  absl::StatusOr<PullOffer> offer = PullOffer::Parse(description);
  if (!offer.ok()) {
    Fail(Error(offer.status().message()), /*notify=*/true);
    return;
  }
  if (offer->bytes != in.total) {  // The receive's buffer holds in.total bytes, no more.
    Fail(Error(absl::StrFormat("its offer to pull tag %#x names %d bytes, its frame %d", tag,
                               offer->bytes, in.total)),
         /*notify=*/true);
    return;
  }
  // This side may refuse pulls (pull_min_bytes == 0); then the sender streams the message.
  absl::Status outcome = limits_.pull_min_bytes == 0
                             ? absl::FailedPreconditionError("pulls are off")
                         : !peer_process_.has_value() || peer_process_unknown_
                             ? absl::FailedPreconditionError("the peer's process is not known")
                             : PullOffered(*peer_process_, tag, *offer, in.user);
  if (absl::IsDataLoss(outcome)) {  // Forged: a peer that means no harm never sends one.
    Fail(Error(outcome.message()), /*notify=*/true);
    return;
  }
  const bool pulled = outcome.ok();
  if (pulled) {
    bytes_received_.fetch_add(in.total, std::memory_order_relaxed);
    in.stripes = 1;
    in.stripes_done = 1;
    Complete(tag);
  }
  // Last: sending may find the link broken and fail the channel, which clears all state. When the
  // pull failed, the sender streams the message instead and the receive stays posted.
  SendControl(FrameType::kRendezvousDone, tag, 0,
              std::vector<uint8_t>{pulled ? uint8_t{1} : uint8_t{0}});
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
  messages_received_.fetch_add(1, std::memory_order_relaxed);
  in->request->Complete(absl::OkStatus(), in->total);
}

void TcpChannel::OnEvent(int stream, uint32_t events) {
  Stream& s = *streams_[stream];
  if (!s.fd.valid() || !Ready(s)) return;
  if (s.paused && (events & (EPOLLERR | EPOLLHUP))) {
    // Level-triggered hang-ups would spin while reading is paused: the stream is lost.
    Fail(Error("connection lost while a message waited for its receive"), !shutting_down_);
    return;
  }
  if (events & EPOLLOUT) Write(s);
  if (!failed_ && s.fd.valid() && (events & (EPOLLIN | EPOLLERR | EPOLLHUP))) Read(s);
}

void TcpChannel::UpdateInterest(Stream& s) {
  if (!s.ready) return;  // The handshake says what it waits for.
  uint32_t interest = 0;
  if (!s.paused && !s.eof) interest |= EPOLLIN;
  if (!s.queue.empty() || WantsStripe(s) || s.io->pending_output()) interest |= EPOLLOUT;
  if (interest != s.interest && s.fd.valid()) {
    s.interest = interest;
    loop_->Modify(s.fd.get(), &s.target, interest);
  }
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
      if (f.op != nullptr) bytes_sent_.fetch_add(f.bytes, std::memory_order_relaxed);
      if (f.op != nullptr && --f.op->stripes_left == 0) {
        messages_sent_.fetch_add(1, std::memory_order_relaxed);
        f.op->request->Complete(f.op->outcome);
      }
      s.queue.pop_front();
    }
  }
  if (s.queue.empty() && s.said_goodbye && !s.io->pending_output()) {
    shutdown(s.fd.get(), SHUT_WR);
  }
  UpdateInterest(s);
}

void TcpChannel::Read(Stream& s) {
  if (!s.ready) return;
  uint64_t budget = 16 << 20;  // Bytes per event, so other streams get their turn.
  // Bytes TLS already took from the socket are read even past the budget: the socket will not
  // say again that they are there.
  while ((budget > 0 || s.io->buffered()) && !failed_ && !s.paused) {
    if (!s.have_header) {
      const IoResult r =
          s.io->Read(s.header_bytes + s.header_got, kFrameHeaderBytes - s.header_got);
      if (r.kind == IoResult::kWouldBlock) return;
      if (r.kind != IoResult::kDone) {
        const std::string cause =
            r.kind == IoResult::kClosed ? "connection closed by peer" : r.error;
        if (s.got_goodbye || shutting_down_) {
          s.eof = true;
          UpdateInterest(s);
          bool all_closed = true;
          for (const auto& other : streams_) all_closed = all_closed && other->eof;
          if (all_closed && !shutting_down_) PeerClosed();
          return;
        }
        LinkLost(s, s.header_got > 0 ? absl::StrFormat("%s inside a frame header", cause) : cause,
                 /*read_side_closed=*/true);
        return;
      }
      s.header_got += r.bytes;
      if (s.header_got < kFrameHeaderBytes) continue;
      absl::StatusOr<FrameHeader> header =
          DecodeFrameHeader(s.header_bytes, limits_.max_frame_bytes);
      if (!header.ok()) {
        Fail(Error(header.status().message()), /*notify=*/true);
        return;
      }
      if (header->epoch != limits_.epoch) {
        Fail(Error(absl::StrFormat("frame of epoch %d, expected %d", header->epoch, limits_.epoch)),
             /*notify=*/true);
        return;
      }
      if (s.receive_seal != nullptr) {
        s.receive_seal->Begin();
        s.receive_seal->Update(s.header_bytes);
      }
      s.header = *header;
      s.have_header = true;
      if (header->type == FrameType::kLeave && header->payload_bytes == 0) {
        s.remaining = 0;  // A goodbye: handled once its trailer checks out.
      } else if (header->type == FrameType::kData) {
        if (!Route(s)) return;
      } else if (header->type == FrameType::kLeave || header->type == FrameType::kRendezvous ||
                 header->type == FrameType::kRendezvousDone ||
                 header->type == FrameType::kStreamsWanted) {
        // A small control frame: its payload is read like data, then handled in FinishStripe.
        if (header->payload_bytes > kMaxControlOnDataStream) {
          Fail(Error(absl::StrFormat("oversized %s frame", FrameTypeName(header->type))),
               /*notify=*/true);
          return;
        }
        s.control.resize(header->payload_bytes);
        s.dest = s.control.data();
        s.remaining = header->payload_bytes;
      } else {
        Fail(Error(absl::StrFormat("unexpected %s frame on a data stream",
                                   FrameTypeName(header->type))),
             /*notify=*/true);
        return;
      }
    }
    if (s.remaining > 0) {
      if (s.discarding && discard_sink_.empty()) discard_sink_.resize(64 << 10);
      uint8_t* to = s.discarding ? discard_sink_.data() : s.dest;
      uint64_t want = std::min(s.remaining, std::max<uint64_t>(budget, 64 << 10));
      if (s.discarding) want = std::min<uint64_t>(want, discard_sink_.size());
      const IoResult r = s.io->Read(to, want);
      if (r.kind == IoResult::kWouldBlock) return;
      if (r.kind != IoResult::kDone) {
        LinkLost(
            s,
            absl::StrFormat("%s inside a %d-byte frame (%d bytes missing)",
                            r.kind == IoResult::kClosed ? "connection closed by peer" : r.error,
                            s.header.payload_bytes, s.remaining),
            /*read_side_closed=*/true);
        return;
      }
      if (s.receive_seal != nullptr) s.receive_seal->Update(std::span<const uint8_t>(to, r.bytes));
      if (!s.discarding) s.dest += r.bytes;
      s.remaining -= r.bytes;
      budget -= std::min<uint64_t>(budget, r.bytes);
      if (s.header.type == FrameType::kData) {
        bytes_received_.fetch_add(r.bytes, std::memory_order_relaxed);
      }
    }
    if (s.remaining > 0) continue;
    // Not yet there (or bad, and the channel failed): the socket says when more arrives.
    if (!ReadTrailer(s)) return;
    FinishStripe(s);
  }
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
        bytes_sent_.fetch_add(send.bytes, std::memory_order_relaxed);
        messages_sent_.fetch_add(1, std::memory_order_relaxed);
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
        Fail(Error(absl::StrFormat(
                 "a request for streams that cannot be met (%d bytes: %s)", s.control.size(),
                 absl::BytesToHexString(std::string(s.control.begin(), s.control.end())))),
             /*notify=*/true);
        return;
      }
      class_streams_[s.control[0]].store(s.control[1], std::memory_order_relaxed);
      return;
    }
    default:
      return;
  }
}

void TcpChannel::PeerClosed() {
  // The peer said goodbye and ended its side of every stream: everything it will ever send has
  // arrived. Messages complete in memory stay deliverable; receives that nothing can satisfy any
  // more fail, and so do offers to pull that it can no longer answer. Its read side may still be
  // open (it waits for our goodbye), so queued sends go on.
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
}

void TcpChannel::ResumePaused() {
  for (auto& stream : streams_) {
    Stream& s = *stream;
    if (!s.paused || failed_) continue;
    s.paused = false;
    if (!Route(s)) continue;
    UpdateInterest(s);
    Read(s);
  }
}

void TcpChannel::Unwatch(Stream& s) {
  if (!s.fd.valid()) return;
  loop_->Unwatch(s.fd.get());
  s.fd.Reset();
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
      if (s.have_header && s.header.type == FrameType::kData && s.header.tag == it->first &&
          s.remaining > 0 && !s.paused) {
        s.discarding = true;  // The rest of this stripe goes nowhere.
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
