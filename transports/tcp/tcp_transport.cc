#include "transports/tcp/tcp_transport.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/auth.h"
#include "core/coordinator_protocol.h"
#include "core/log.h"
#include "core/placement.h"
#include "transports/tcp/handshake.h"

namespace hmc {

// An inbound connection that has not proven itself yet.
struct TcpTransport::Handshake {
  UniqueFd fd;
  std::string peer;
  // Both ends of a TCP connection (not for local sockets): whether TLS is wanted on it.
  std::optional<SocketAddress> self_address;
  std::optional<SocketAddress> peer_address;
  std::string nonce;
  FrameParser parser{kMaxHandshakePayloadBytes};
  absl::Time accepted;
  absl::Time deadline;
  Target target{nullptr, -1};  // channel == nullptr, stream == fd: a handshake.
  bool local = false;          // Arrived on the local (Unix) socket.
  bool closing = false;        // Rejected: discarding input until drop_at.
};

namespace {
constexpr int kListenerStream = -1;
constexpr int kLocalListenerStream = -3;
constexpr char kLocalPrefix[] = " local:";
// Inbound connections that have not proven the token; past this the oldest is dropped for a new
// one. Far above what a group opens at once (peers x streams arrive over a few round trips).
constexpr size_t kMaxHandshakes = 1024;
}  // namespace

TcpTransport::TcpTransport(const TcpTransportConfig& config) : config_(config) {}

absl::StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Create(
    const TcpTransportConfig& config) {
  if (absl::Status s = RequireToken(config.token, config.insecure, "rank transport"); !s.ok()) {
    return s;
  }
  absl::StatusOr<SocketAddress> bind = SocketAddress::Parse(config.bind);
  if (!bind.ok()) return bind.status();
  std::unique_ptr<TcpTransport> t(new TcpTransport(config));
  absl::StatusOr<std::unique_ptr<TlsContext>> tls = TlsContext::Create(config.tls);
  if (!tls.ok()) return tls.status();
  t->tls_ = std::move(*tls);
  absl::StatusOr<UniqueFd> listener = ListenTcp(*bind, 1024, config.socket_buffer_bytes);
  if (!listener.ok()) return listener.status();
  if (absl::Status s = SetCongestionControl(listener->get(), config.tcp_congestion); !s.ok()) {
    return s;
  }
  t->listener_ = std::move(*listener);
  absl::StatusOr<SocketAddress> local = SocketAddress::LocalOf(t->listener_.get());
  if (!local.ok()) return local.status();
  t->address_ = *local;
  t->published_ = local->ToString();
  if (config.local_sockets) {
    const std::string name = absl::StrCat("hmc-", config.world_id, "-",
                                          absl::BytesToHexString(RandomNonce().substr(0, 8)));
    absl::StatusOr<UniqueFd> local_listener = ListenUnix(name, config.socket_buffer_bytes);
    if (!local_listener.ok()) return local_listener.status();
    t->local_listener_ = std::move(*local_listener);
    absl::StrAppend(&t->published_, kLocalPrefix, name);
  }
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  if (!loop.ok()) return loop.status();
  t->loop_ = *std::move(loop);
  if (config.waiters_poll) {
    t->loop_->LetWaitersPoll(
        [raw = t.get()](epoll_data_t data, uint32_t events) { raw->OnLoopEvent(data, events); },
        [raw = t.get()] { raw->AfterLoopEvents(); });
  }
  t->listener_target_ = Target{nullptr, kListenerStream};
  auto listen_event = [](Target* target) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = target;
    return ev;
  };
  t->accept_.emplace(t->loop_->epoll_fd(), t->listener_.get(), listen_event(&t->listener_target_));
  if (t->local_listener_.valid()) {
    t->local_accept_.emplace(t->loop_->epoll_fd(), t->local_listener_.get(),
                             listen_event(&t->local_listener_target_));
  }
  t->thread_ = std::thread([raw = t.get()] { raw->Run(); });
  return t;
}

TcpTransport::~TcpTransport() {
  if (loop_ == nullptr) return;  // Create failed before making it.
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
  // A caller that ran a send or receive here may still be in it.
  loop_->RunExclusively([this] {
    stopped_ = true;
    if (shutdown_request_ != nullptr) shutdown_request_->Complete(absl::OkStatus());
    for (auto& channel : channels_) {
      if (channel != nullptr) channel->Fail(absl::CancelledError("transport shut down"), false);
    }
  });
}

void TcpTransport::Post(std::function<void()> work) { loop_->Post(std::move(work)); }

void TcpTransport::RunHereOrPost(std::function<void()> work) {
  loop_->RunHereOrPost(std::move(work));
}

RequestPtr TcpTransport::NewRequest(bool waiter_polls) {
  if (!config_.waiters_poll) return std::make_shared<Request>();
  auto request = std::make_shared<Request>(loop_, waiter_polls);
  // A large message moves from now on, whoever waits and whenever: the progress thread's.
  if (!waiter_polls) request->LeaveToLoopThread();
  return request;
}

void TcpTransport::Watch(int fd, Target* target, uint32_t events) {
  loop_->Watch(fd, epoll_data_t{.ptr = target}, events);
}

void TcpTransport::Modify(int fd, Target* target, uint32_t events) {
  loop_->Modify(fd, epoll_data_t{.ptr = target}, events);
}

void TcpTransport::Unwatch(int fd) { loop_->Unwatch(fd); }

bool TcpTransport::ReserveUnexpected(uint64_t bytes) {
  // The lengths come off the wire: compared without a sum that could wrap.
  if (bytes > config_.max_unexpected_bytes ||
      unexpected_bytes_ > config_.max_unexpected_bytes - bytes) {
    unexpected_waits_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  unexpected_bytes_ += bytes;
  if (unexpected_bytes_ > unexpected_peak_.load(std::memory_order_relaxed))
    unexpected_peak_.store(unexpected_bytes_, std::memory_order_relaxed);
  return true;
}

void TcpTransport::ReleaseUnexpected(uint64_t bytes) {
  unexpected_bytes_ -= bytes;
  if (stopped_) return;
  for (auto& channel : channels_) {
    if (channel != nullptr) channel->ResumePaused();
  }
}

void TcpTransport::OnChannelFailed(int rank, const absl::Status& why) {
  if (std::this_thread::get_id() != thread_.get_id() && !stopped_) {
    // A caller's send or receive, run on its thread (RunHereOrPost), found the link failed: the
    // callback, which may take the caller's own locks, runs on the progress thread.
    Post([this, rank, why] { OnChannelFailed(rank, why); });
    return;
  }
  Logf("tcp", "rank %d: link to %s failed: %s", rank_, channels_[rank]->peer_description(),
       why.message());
  FailureCallback callback;
  {
    MutexLock lock(&mu_);
    callback = failure_callback_;
  }
  if (callback) callback(rank, why);
}

void TcpTransport::SetFailureCallback(FailureCallback callback) {
  MutexLock lock(&mu_);
  failure_callback_ = std::move(callback);
}

std::vector<std::string> TcpTransport::rejections() const { return rejections_.recent(); }

void TcpTransport::Run() {
  BindThisThread(ThreadRole::kProgress);
  while (loop_->RunOnce(
      shutdown_request_ != nullptr ? 5 : 100,
      [this](epoll_data_t data, uint32_t events) { OnLoopEvent(data, events); },
      [this] { AfterLoopEvents(); })) {
  }
}

void TcpTransport::OnLoopEvent(epoll_data_t data, uint32_t events) {
  auto* target = static_cast<Target*>(data.ptr);
  if (target->channel != nullptr) {
    target->channel->OnEvent(target->stream, events);
  } else if (target->stream == kListenerStream) {
    Accept(*accept_, /*local=*/false);
  } else if (target->stream == kLocalListenerStream) {
    Accept(*local_accept_, /*local=*/true);
  } else if (auto it = handshakes_.find(target->stream); it != handshakes_.end()) {
    OnHandshakeReadable(*it->second);
  }
}

void TcpTransport::AfterLoopEvents() {
  retired_handshakes_.clear();
  CheckHandshakeDeadlines();
  CheckShutdown();
}

void TcpTransport::Accept(AcceptGate& gate, bool local) {
  for (;;) {
    std::optional<UniqueFd> accepted = gate.Next();
    if (!accepted.has_value()) {
      if (gate.out_of_descriptors()) ShedOldestHandshake("out of descriptors");
      return;
    }
    if (handshakes_.size() >= kMaxHandshakes) {
      ShedOldestHandshake(
          absl::StrFormat("more than %d connections have not proven the token", kMaxHandshakes));
    }
    const int fd = accepted->get();
    auto h = std::make_unique<Handshake>();
    h->fd = std::move(*accepted);
    absl::StatusOr<SocketAddress> peer = SocketAddress::PeerOf(fd);
    h->peer = local ? "a local socket" : peer.ok() ? peer->ToString() : "unknown peer";
    absl::StatusOr<SocketAddress> self = SocketAddress::LocalOf(fd);
    if (!local && peer.ok() && self.ok()) {
      h->peer_address = *peer;
      h->self_address = *self;
    }
    h->local = local;
    h->nonce = RandomNonce();
    h->accepted = absl::Now();
    h->deadline = h->accepted + config_.handshake_timeout;
    h->target = Target{nullptr, fd};
    SetNoDelay(fd).IgnoreError();
    // A fresh socket's send buffer is empty: this small write cannot block.
    if (!WriteControlFrame(fd, FrameType::kPeerChallenge, SerializeString(h->nonce),
                           absl::Now() + absl::Seconds(1))
             .ok()) {
      continue;
    }
    Watch(fd, &h->target, EPOLLIN);
    handshakes_[fd] = std::move(h);
  }
}

absl::Status TcpTransport::CheckHello(const Handshake& h, const PeerHello& hello) const {
  if (!ProofsEqual(hello.proof, hello.Proof(config_.token, h.nonce))) {
    return absl::PermissionDeniedError("authentication failed: wrong token");
  }
  if (hello.world_id != config_.world_id) {
    return absl::PermissionDeniedError(absl::StrFormat("wrong world id '%s' (this peer is in '%s')",
                                                       hello.world_id, config_.world_id));
  }
  if (hello.epoch != config_.limits.epoch ||
      hello.streams != static_cast<uint16_t>(config_.limits.streams)) {
    return absl::PermissionDeniedError(
        absl::StrFormat("mismatched settings: peer has epoch %d and %d streams, "
                        "this rank epoch %d and %d streams",
                        hello.epoch, hello.streams, config_.limits.epoch, config_.limits.streams));
  }
  if (hello.integrity != static_cast<uint8_t>(config_.limits.integrity)) {
    return absl::PermissionDeniedError(
        absl::StrFormat("mismatched settings: peer has integrity %d, this rank %s", hello.integrity,
                        FrameIntegrityName(config_.limits.integrity)));
  }
  // TLS where either end wants it; a hello that leaves it out where this rank wants it is refused
  // (the proof covers the flag: nobody on the way can have removed it).
  if (hello.tls && h.local) {
    return absl::PermissionDeniedError("TLS asked for on a local socket");
  }
  if (!hello.tls && !h.local &&
      (!h.peer_address.has_value() ||
       WantsTls(config_.tls.mode, *h.self_address, *h.peer_address))) {
    return absl::PermissionDeniedError("this rank requires TLS on this link (option tls)");
  }
  // Everything that could refuse the stream is checked before PeerAccept goes out: a connector
  // that is told it was accepted must be attached.
  return CheckInbound(hello.rank, hello.to_rank, hello.stream);
}

void TcpTransport::OnHandshakeReadable(Handshake& h) {
  uint8_t buffer[4096];
  const ssize_t n = recv(h.fd.get(), buffer, sizeof(buffer), 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (h.closing) {
    if (n <= 0) DropHandshake(h.fd.get());
    return;
  }
  if (n <= 0) {
    RejectHandshake(h, h.parser.buffered() > 0
                           ? absl::StrFormat("connection closed inside a frame (%d bytes of it)",
                                             h.parser.buffered())
                           : "connection closed before the handshake");
    return;
  }
  h.parser.Feed(std::span<const uint8_t>(buffer, static_cast<size_t>(n)));
  absl::StatusOr<std::optional<Frame>> frame = h.parser.Next();
  if (!frame.ok()) {
    RejectHandshake(h, std::string(frame.status().message()));
    return;
  }
  if (!frame->has_value()) return;
  if ((*frame)->header.type != FrameType::kPeerHello || h.parser.buffered() != 0) {
    RejectHandshake(
        h, absl::StrFormat("expected a peer hello, got %s", FrameTypeName((*frame)->header.type)));
    return;
  }
  absl::StatusOr<PeerHello> hello = PeerHello::Parse((*frame)->payload);
  if (!hello.ok()) {
    RejectHandshake(h, std::string(hello.status().message()));
    return;
  }
  if (absl::Status refused = CheckHello(h, *hello); !refused.ok()) {
    RejectHandshake(h, std::string(refused.message()));
    return;
  }
  absl::StatusOr<StreamProtection> protection =
      Protect(h.fd.get(), h.local, hello->tls, DeriveStreamSecrets(config_.token, *hello, h.nonce),
              /*connector=*/false);
  if (!protection.ok()) {
    RejectHandshake(h, std::string(protection.status().message()));
    return;
  }
  if (!WriteControlFrame(h.fd.get(), FrameType::kPeerAccept,
                         SerializeString(PeerAcceptProof(config_.token, *hello, h.nonce)),
                         absl::Now() + absl::Seconds(1))
           .ok()) {
    DropHandshake(h.fd.get());
    return;
  }
  const int fd = h.fd.get();
  Unwatch(fd);
  UniqueFd owned(h.fd.Release());
  const std::string peer = h.peer;
  const bool local = h.local;
  RetireHandshake(fd);
  if (absl::Status s = AttachInbound(hello->rank, hello->to_rank, hello->stream, std::move(owned),
                                     local, std::move(*protection));
      !s.ok()) {
    rejections_.Add(peer, std::string(s.message()));
  }
}

absl::Status TcpTransport::CheckInbound(int rank, int to_rank, int stream) const {
  if (rank_ >= 0 && to_rank != rank_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d dialed rank %d, but this is rank %d", rank, to_rank, rank_));
  }
  if (!channels_.empty() && rank <= rank_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d may not connect to rank %d (the higher rank connects)", rank, rank_));
  }
  if (!channels_.empty() && rank < static_cast<int>(channels_.size()) &&
      channels_[rank] != nullptr) {
    if (absl::Status s = channels_[rank]->CanAttach(stream); !s.ok()) {
      return absl::Status(s.code(), absl::StrFormat("rank %d: %s", rank, s.message()));
    }
    return absl::OkStatus();
  }
  // Before ConnectAll, or a rank joining the group that this rank has not heard of yet: held in
  // early_, whose size is bounded.
  constexpr size_t kMaxEarlyStreams = 4096;
  if (early_.size() >= kMaxEarlyStreams) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("too many streams from ranks not expected (rank %d)", rank));
  }
  if (early_.count({rank, stream}) != 0) {
    return absl::AlreadyExistsError(
        absl::StrFormat("duplicate connection from rank %d stream %d", rank, stream));
  }
  return absl::OkStatus();
}

absl::StatusOr<StreamProtection> TcpTransport::Protect(int fd, bool local, bool tls,
                                                       const StreamSecrets& secrets,
                                                       bool connector) const {
  StreamProtection protection;
  if (local) return protection;  // The same host: the kernel carries the bytes.
  if (tls) {
    absl::StatusOr<std::unique_ptr<StreamIo>> io = tls_->Wrap(fd, !connector, secrets.tls_psk);
    if (!io.ok()) return io.status();
    protection.io = std::move(*io);
    return protection;
  }
  protection.integrity = config_.limits.integrity;
  protection.send_key = connector ? secrets.to_acceptor : secrets.to_connector;
  protection.receive_key = connector ? secrets.to_connector : secrets.to_acceptor;
  return protection;
}

absl::Status TcpTransport::AttachInbound(int rank, int to_rank, int stream, UniqueFd fd, bool local,
                                         StreamProtection protection) {
  if (absl::Status s = CheckInbound(rank, to_rank, stream); !s.ok()) return s;
  if (channels_.empty() || rank >= static_cast<int>(channels_.size()) ||
      channels_[rank] == nullptr) {
    early_.try_emplace({rank, stream},
                       EarlyStream{std::move(fd), local, to_rank, std::move(protection)});
    return absl::OkStatus();
  }
  if (absl::Status s =
          channels_[rank]->AttachStream(stream, std::move(fd), local, std::move(protection));
      !s.ok()) {
    return absl::Status(s.code(), absl::StrFormat("rank %d: %s", rank, s.message()));
  }
  UpdateConnected();
  return absl::OkStatus();
}

void TcpTransport::RejectHandshake(Handshake& h, const std::string& reason) {
  rejections_.Add(h.peer, reason);
  // One attempt, never a wait on the progress thread: the socket's send buffer held only the
  // challenge, so the small error frame fits unless the peer is gone.
  WriteControlFrame(h.fd.get(), FrameType::kError, SerializeString(reason), absl::Now())
      .IgnoreError();
  shutdown(h.fd.get(), SHUT_WR);
  // Keep reading (and discarding) for a moment: closing with unread input would reset the
  // connection and the peer might never see why it was refused.
  h.closing = true;
  h.deadline = absl::Now() + absl::Seconds(1);
}

void TcpTransport::ShedOldestHandshake(const std::string& why) {
  auto oldest = std::min_element(
      handshakes_.begin(), handshakes_.end(),
      [](const auto& a, const auto& b) { return a.second->accepted < b.second->accepted; });
  if (oldest == handshakes_.end()) return;
  rejections_.Add(oldest->second->peer, absl::StrFormat("dropped before its handshake: %s", why));
  DropHandshake(oldest->first);
}

void TcpTransport::DropHandshake(int fd) {
  Unwatch(fd);
  RetireHandshake(fd);
}

void TcpTransport::RetireHandshake(int fd) {
  auto it = handshakes_.find(fd);
  if (it == handshakes_.end()) return;
  // Kept until the end of the event batch: a later event of the batch may still point at it.
  retired_handshakes_.push_back(std::move(it->second));
  handshakes_.erase(it);
}

void TcpTransport::CheckHandshakeDeadlines() {
  const absl::Time now = absl::Now();
  accept_->Tick(now);
  if (local_accept_.has_value()) local_accept_->Tick(now);
  std::vector<int> expired;
  for (auto& [fd, h] : handshakes_) {
    if (now >= h->deadline) expired.push_back(fd);
  }
  for (int fd : expired) {
    Handshake& h = *handshakes_[fd];
    if (h.closing) {
      DropHandshake(fd);
    } else {
      RejectHandshake(h, "handshake timed out");
    }
  }
}

void TcpTransport::UpdateConnected() {
  bool all = !channels_.empty();
  for (auto& channel : channels_) {
    if (channel != nullptr && !channel->connected()) all = false;
  }
  MutexLock lock(&mu_);
  all_connected_ = all;
}

absl::Status TcpTransport::ConnectStream(const PeerAddress& peer, int rank, int stream,
                                         absl::Time deadline) {
  // A peer in this network namespace is reachable on its local socket; otherwise (another host,
  // or another emulated host) that name does not exist here and TCP is used.
  const size_t local_at = peer.address.find(kLocalPrefix);
  absl::StatusOr<UniqueFd> fd = absl::UnavailableError("no local socket");
  if (config_.local_sockets && local_at != std::string::npos) {
    fd = ConnectUnix(peer.address.substr(local_at + std::strlen(kLocalPrefix)), deadline,
                     config_.socket_buffer_bytes);
  }
  const bool local = fd.ok();
  if (!fd.ok()) {
    absl::StatusOr<SocketAddress> address = SocketAddress::Parse(peer.address.substr(0, local_at));
    if (!address.ok()) return address.status();
    fd = ConnectTcp(*address, deadline, config_.socket_buffer_bytes);
  }
  if (!fd.ok()) return fd.status();
  bool tls = false;
  if (!local) {
    if (absl::Status s = SetCongestionControl(fd->get(), config_.tcp_congestion); !s.ok()) return s;
    absl::StatusOr<SocketAddress> self = SocketAddress::LocalOf(fd->get());
    absl::StatusOr<SocketAddress> to = SocketAddress::PeerOf(fd->get());
    tls = !self.ok() || !to.ok() || WantsTls(config_.tls.mode, *self, *to);
  }
  PeerHello hello;
  hello.world_id = config_.world_id;
  hello.rank = rank;
  hello.to_rank = peer.rank;
  hello.stream = static_cast<uint16_t>(stream);
  hello.streams = static_cast<uint16_t>(config_.limits.streams);
  hello.epoch = config_.limits.epoch;
  hello.integrity = static_cast<uint8_t>(config_.limits.integrity);
  hello.tls = tls;
  absl::StatusOr<StreamSecrets> secrets =
      ConnectorHandshake(fd->get(), hello, config_.token, deadline);
  if (!secrets.ok()) return secrets.status();
  absl::StatusOr<StreamProtection> protection =
      Protect(fd->get(), local, tls, *secrets, /*connector=*/true);
  if (!protection.ok()) return protection.status();
  auto owned = std::make_shared<UniqueFd>(std::move(*fd));
  auto guard = std::make_shared<StreamProtection>(std::move(*protection));
  Post([this, r = peer.rank, stream, owned, local, guard] {
    if (channels_.empty() || channels_[r] == nullptr) return;
    if (absl::Status s =
            channels_[r]->AttachStream(stream, std::move(*owned), local, std::move(*guard));
        !s.ok()) {
      Logf("tcp", "rank %d: attaching stream %d to rank %d: %s", rank_, stream, r, s.message());
    }
    UpdateConnected();
  });
  return absl::OkStatus();
}

void TcpTransport::AttachEarly(int rank) {
  for (auto it = early_.lower_bound({rank, 0}); it != early_.end() && it->first.first == rank;) {
    EarlyStream early = std::move(it->second);
    const int stream = it->first.second;
    it = early_.erase(it);
    if (absl::Status s = AttachInbound(rank, early.to_rank, stream, std::move(early.fd),
                                       early.local, std::move(early.protection));
        !s.ok()) {
      rejections_.Add(absl::StrFormat("rank %d stream %d", rank, stream), std::string(s.message()));
    }
  }
}

std::vector<std::shared_ptr<Channel>> TcpTransport::ExpectPeers(
    const std::vector<PeerAddress>& peers) {
  std::vector<std::shared_ptr<TcpChannel>> made;
  for (const PeerAddress& p : peers) {
    made.push_back(std::make_shared<TcpChannel>(p.rank, p.description, config_.limits,
                                                static_cast<TcpLoop*>(this)));
  }
  Post([this, made] {
    for (const auto& channel : made) {
      const int rank = channel->peer_rank();
      if (rank >= static_cast<int>(channels_.size())) channels_.resize(rank + 1);
      channels_[rank] = channel;
      AttachEarly(rank);
    }
  });
  return std::vector<std::shared_ptr<Channel>>(made.begin(), made.end());
}

std::vector<std::string> TcpTransport::PeersMissingStreams() {
  // Known on the progress thread; ask it.
  auto missing = std::make_shared<std::vector<std::string>>();
  auto done = std::make_shared<Request>();
  Post([this, missing, done] {
    for (auto& channel : channels_) {
      if (channel != nullptr && !channel->connected()) {
        missing->push_back(channel->peer_description());
      }
    }
    done->Complete(absl::OkStatus());
  });
  // Read only once the thread wrote it.
  if (!done->Wait(absl::Now() + absl::Seconds(5)).ok()) return {"(peers unknown)"};
  return *missing;
}

absl::StatusOr<std::vector<std::shared_ptr<Channel>>> TcpTransport::ConnectAll(
    int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) {
  int ids = 0;
  bool listed = false;
  for (const PeerAddress& p : peers) {
    ids = std::max(ids, p.rank + 1);
    listed = listed || p.rank == rank;
  }
  if (!listed || rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d is not among the %d peers", rank, peers.size()));
  }
  std::vector<std::shared_ptr<TcpChannel>> channels(ids);
  for (const PeerAddress& p : peers) {
    if (p.rank != rank) {
      channels[p.rank] = std::make_shared<TcpChannel>(p.rank, p.description, config_.limits,
                                                      static_cast<TcpLoop*>(this));
    }
  }
  Post([this, rank, channels] {
    rank_ = rank;
    channels_ = channels;
    for (const auto& channel : channels) {
      if (channel != nullptr) AttachEarly(channel->peer_rank());
    }
    UpdateConnected();
  });
  // The higher rank of each pair connects. Every (peer, stream) connection is a task, run by a
  // bounded set of threads at once: over a 100 ms path each connection costs several round trips
  // (TCP, challenge, hello, accept), so connecting one after another would take seconds.
  std::vector<std::pair<const PeerAddress*, int>> tasks;
  for (const PeerAddress& p : peers) {
    for (int s = 0; p.rank < rank && s < config_.limits.streams; ++s) tasks.emplace_back(&p, s);
  }
  std::atomic<size_t> next_task{0};
  Mutex errors_mu;
  std::vector<std::string> errors;
  std::set<int> failed_peers;
  std::vector<std::thread> connectors;
  constexpr size_t kMaxConnectors = 32;
  for (size_t t = 0; t < std::min(tasks.size(), kMaxConnectors); ++t) {
    connectors.emplace_back([&] {
      for (size_t i; (i = next_task.fetch_add(1)) < tasks.size();) {
        const auto [p, stream] = tasks[i];
        {
          MutexLock lock(&errors_mu);
          if (failed_peers.contains(p->rank)) continue;  // One error per peer is enough.
        }
        if (absl::Status st = ConnectStream(*p, rank, stream, deadline); !st.ok()) {
          MutexLock lock(&errors_mu);
          if (failed_peers.insert(p->rank).second) {
            errors.push_back(absl::StrFormat("%s: %s", p->description, st.message()));
          }
        }
      }
    });
  }
  bool connected;
  {
    MutexLock lock(&mu_);
    connected = mu_.AwaitWithDeadline(absl::Condition(&all_connected_), deadline) || all_connected_;
  }
  for (auto& t : connectors) t.join();
  if (!connected) {
    return absl::DeadlineExceededError(
        absl::StrFormat("rank %d: not connected to %s before the deadline%s%s", rank,
                        absl::StrJoin(PeersMissingStreams(), ", "), errors.empty() ? "" : ": ",
                        absl::StrJoin(errors, "; ")));
  }
  const int local_peers = static_cast<int>(std::count_if(
      channels.begin(), channels.end(), [](const auto& c) { return c != nullptr && c->local(); }));
  loop_->SetWaiterSpin(
      WaiterSpinFor(config_, local_peers, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))));
  return std::vector<std::shared_ptr<Channel>>(channels.begin(), channels.end());
}

EventLoop::Spin WaiterSpinFor(const TcpTransportConfig& config, int local_peers, int cpus) {
  const bool shared_cores = std::max(config.ranks_on_host, 1 + local_peers) > cpus;
  absl::Duration time = absl::Microseconds(shared_cores ? 100 : 50);
  if (config.waiter_spin_us >= 0) time = absl::Microseconds(config.waiter_spin_us);
  return EventLoop::Spin{time, shared_cores};
}

absl::Status TcpTransport::Shutdown(absl::Time deadline) {
  auto done = std::make_shared<Request>();
  Post([this, done, deadline] {
    for (auto& channel : channels_) {
      if (channel != nullptr) channel->BeginShutdown();
    }
    shutdown_request_ = done;
    shutdown_deadline_ = deadline;
  });
  return done->Wait(deadline + absl::Seconds(1));
}

void TcpTransport::CheckShutdown() {
  if (shutdown_request_ == nullptr) return;
  std::vector<std::string> open;
  for (auto& channel : channels_) {
    if (channel != nullptr && !channel->shutdown_complete()) {
      open.push_back(channel->peer_description());
    }
  }
  if (!open.empty() && absl::Now() < shutdown_deadline_) return;
  shutdown_request_->Complete(MissingGoodbyes(open));
  shutdown_request_.reset();
}

}  // namespace hmc
