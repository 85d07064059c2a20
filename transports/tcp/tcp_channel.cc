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
#include "transports/tcp/tcp_channel_parts.h"
#include "transports/tcp/tcp_loop.h"

namespace hmc {

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

RequestPtr TcpChannel::NewRequest(size_t bytes) const {
  // A message below the striping size travels as one frame on one stream: waiting for it is
  // latency-bound, and its waiter polls. Larger ones leave the sockets to the progress thread,
  // which goes on reading and writing while the waiter reduces what arrived.
  return loop_->NewRequest(/*waiter_polls=*/bytes <
                           stripe_min_bytes_.load(std::memory_order_relaxed));
}

RequestPtr TcpChannel::Send(uint64_t tag, const void* data, size_t bytes) {
  return PostSend(tag, data, bytes, /*may_pull=*/true);
}

RequestPtr TcpChannel::SendEager(uint64_t tag, const void* data, size_t bytes) {
  return PostSend(tag, data, bytes, /*may_pull=*/false);
}

RequestPtr TcpChannel::PostSend(uint64_t tag, const void* data, size_t bytes, bool may_pull) {
  RequestPtr request = NewRequest(bytes);
  loop_->RunHereOrPost([self = shared_from_this(), tag, data, bytes, may_pull, request] {
    self->DoSend(tag, static_cast<const uint8_t*>(data), bytes, may_pull, request);
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
  RequestPtr request = NewRequest(bytes);
  loop_->RunHereOrPost([self = shared_from_this(), tag, data, bytes, up_to, request] {
    self->DoRecv(tag, static_cast<uint8_t*>(data), bytes, up_to, request);
  });
  return request;
}

absl::Status TcpChannel::status() const {
  MutexLock lock(&mu_);
  return status_;
}

LinkStats TcpChannel::stats() const { return counters_.Read(); }

absl::Status TcpChannel::CanAttach(int index) const {
  if (index < 0 || index >= static_cast<int>(streams_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("stream %d out of range (%d streams)", index, streams_.size()));
  }
  if (streams_[index]->fd.valid()) {
    return absl::AlreadyExistsError(absl::StrFormat("duplicate connection for stream %d", index));
  }
  if (failed_) return status();
  // Its streams close one by one once both sides said goodbye: none may take their place.
  if (shutting_down_) return absl::FailedPreconditionError("the channel is closing");
  return absl::OkStatus();
}

absl::Status TcpChannel::AttachStream(int index, UniqueFd fd, bool local,
                                      StreamProtection protection) {
  if (absl::Status can = CanAttach(index); !can.ok()) return can;
  Stream& s = *streams_[index];
  s.io = protection.io != nullptr ? std::move(protection.io)
                                  : std::make_unique<BufferedSocketIo>(fd.get());
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

void TcpChannel::OnEvent(int stream, uint32_t events) {
  Stream& s = *streams_[stream];
  if (!s.fd.valid() || !Ready(s)) return;
  if (s.wrote_end && s.eof) {
    // Ended both ways, all read and all sent: the kernel now reports a hang-up on every wait.
    Unwatch(s);
    return;
  }
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

void TcpChannel::Unwatch(Stream& s) {
  if (!s.fd.valid()) return;
  loop_->Unwatch(s.fd.get());
  s.fd.Reset();
}

}  // namespace hmc
