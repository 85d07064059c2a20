#include "core/coordinator.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/auth.h"
#include "core/coordinator_protocol.h"
#include "core/log.h"

namespace hmc {

struct Coordinator::Connection {
  // Where the bytes after the challenge stand: the first one tells a TLS handshake (0x16, a
  // record of type handshake) from a plain join frame ('H' of the magic).
  enum class Stage { kChallenged, kTlsHandshake, kFrames };

  UniqueFd fd;
  std::unique_ptr<StreamIo> io;  // SocketIo, or TlsIo once the client started TLS.
  Stage stage = Stage::kChallenged;
  bool tls_required = false;  // Option tls wants it for this peer: plain frames are refused.
  uint64_t id = 0;   // Unique for the coordinator's lifetime, unlike the descriptor's number.
  std::string peer;  // Remote address, for messages.
  FrameParser parser{kMaxHandshakePayloadBytes};
  std::string nonce;
  absl::Time handshake_deadline;
  int rank = -1;  // -1 until joined.
  absl::Time last_seen;
  absl::Time challenged;  // When the challenge went out: its answer times the round trip.
  absl::Duration heartbeat_timeout;
  bool evicted = false;  // Declared failed while connected: what it sends is ignored.
  bool waiting = false;  // A join into a running group, held until there is room (HandleLateJoin).
  std::vector<uint8_t> out;
  size_t out_offset = 0;
  // After an error: what is queued is flushed, the write side shut down, input discarded, and the
  // connection dropped at drop_at (closing with unread input would reset it and lose the error).
  bool closing = false;
  absl::Time drop_at = absl::InfiniteFuture();
};

namespace {
constexpr size_t kMaxQueuedBytes = 64 << 20;
// Connections that have not proven the token yet; past this the oldest is dropped for a new one
// (a rank proves itself within a round trip of connecting, a flood's connections never do).
constexpr int kMaxUnauthenticated = 256;
// Reads per readiness event (of 64 KiB each): one busy client cannot starve the others.
constexpr int kReadsPerEvent = 16;
constexpr uint64_t kListenKey = ~uint64_t{0};

// The table's entry for a rank that joined with `join`: alive, as a member.
PeerEntry EntryOf(int rank, const JoinRequest& join) {
  PeerEntry entry;
  entry.rank = rank;
  entry.address = join.address;
  entry.zone = join.zone;
  entry.hostname = join.hostname;
  entry.cpus = join.cpus;
  return entry;
}

}  // namespace

absl::StatusOr<CoordinatorConfig> CoordinatorConfigFor(const CoreOptions& options) {
  absl::StatusOr<TlsConfig> tls = TlsConfigFrom(options);
  if (!tls.ok()) return tls.status();
  CoordinatorConfig config;
  config.world_size = options.world_size;
  config.world_id = options.world_id;
  config.token = options.token;
  config.heartbeat_timeout = options.heartbeat_timeout;
  config.tls = *std::move(tls);
  return config;
}

Coordinator::Coordinator(const CoordinatorConfig& config) : config_(config) {}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(const CoordinatorConfig& config) {
  if (config.world_size < 1) return absl::InvalidArgumentError("world size must be at least 1");
  if (absl::Status s = RequireToken(config.token, config.insecure, "coordinator"); !s.ok()) {
    return s;
  }
  if (config.token.empty()) Logf("coordinator", "insecure: no token; anyone may join");
  SkipMutexCycleDetectionInReleaseBuilds();
  absl::StatusOr<SocketAddress> bind = SocketAddress::Parse(config.bind);
  if (!bind.ok()) return bind.status();
  std::unique_ptr<Coordinator> c(new Coordinator(config));
  absl::StatusOr<std::unique_ptr<TlsContext>> tls = TlsContext::Create(config.tls);
  if (!tls.ok()) return tls.status();
  c->tls_ = *std::move(tls);
  absl::StatusOr<UniqueFd> listener = ListenTcp(*bind);
  if (!listener.ok()) return listener.status();
  c->listener_ = std::move(*listener);
  absl::StatusOr<SocketAddress> local = SocketAddress::LocalOf(c->listener_.get());
  if (!local.ok()) return local.status();
  c->address_ = *local;
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  if (!loop.ok()) {
    return absl::Status(loop.status().code(),
                        absl::StrCat("coordinator: ", loop.status().message()));
  }
  c->loop_ = *std::move(loop);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenKey;
  c->accept_.emplace(c->loop_->epoll_fd(), c->listener_.get(), ev);
  c->rank_fd_.assign(config.world_size, -1);
  c->table_.world_size = config.world_size;
  c->table_.peers.resize(config.world_size);
  for (int r = 0; r < config.world_size; ++r) {
    c->table_.peers[r].rank = r;
    c->table_.peers[r].alive = false;
  }
  c->thread_ = std::thread([raw = c.get()] { raw->Loop(); });
  return c;
}

Coordinator::~Coordinator() {
  if (loop_ != nullptr) loop_->Stop();  // Null where Create failed before making it.
  if (thread_.joinable()) thread_.join();
}

bool Coordinator::WaitUntilFinished(absl::Time deadline) {
  MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&finished_), deadline);
}

PeerTable Coordinator::table() const {
  MutexLock lock(&mu_);
  return table_;
}

std::vector<std::string> Coordinator::rejections() const { return rejections_.recent(); }

void Coordinator::Loop() {
  while (loop_->RunOnce(100, [this](epoll_data_t data, uint32_t events) {
    if (data.u64 == kListenKey) {
      Accept();
      return;
    }
    const int fd = static_cast<int>(data.u64);
    auto it = connections_.find(fd);
    if (it == connections_.end()) return;
    Connection& c = *it->second;
    if (c.stage == Connection::Stage::kTlsHandshake) {
      OnReadable(c);  // Whichever way the handshake waited, it goes on.
      return;
    }
    if (events & EPOLLOUT) Flush(c);
    if (connections_.count(fd) && (events & (EPOLLIN | EPOLLERR | EPOLLHUP))) OnReadable(c);
  })) {
    CheckTimers();
  }
  // The listener goes before the connections: a rank that sees its connection close and redials
  // at once must be refused, not race a listener that is closing (Linux then drops the SYN
  // silently and the rank waits a whole SYN retransmission, a second, to reach a restarted
  // coordinator).
  accept_.reset();
  listener_.Reset();
  connections_.clear();
}

void Coordinator::Accept() {
  for (;;) {
    std::optional<UniqueFd> accepted = accept_->Next();
    if (!accepted.has_value()) {
      if (accept_->out_of_descriptors()) ShedOldestUnauthenticated("out of descriptors");
      return;
    }
    if (Unauthenticated() >= kMaxUnauthenticated) {
      ShedOldestUnauthenticated(absl::StrFormat(
          "more than %d connections have not proven the token", kMaxUnauthenticated));
    }
    const int fd = accepted->get();
    auto c = std::make_unique<Connection>();
    c->fd = std::move(*accepted);
    c->io = std::make_unique<SocketIo>(fd);
    c->id = ++connections_accepted_;
    absl::StatusOr<SocketAddress> peer = SocketAddress::PeerOf(fd);
    absl::StatusOr<SocketAddress> self = SocketAddress::LocalOf(fd);
    c->peer = peer.ok() ? peer->ToString() : "unknown peer";
    c->tls_required = !peer.ok() || !self.ok() || WantsTls(config_.tls.mode, *self, *peer);
    c->handshake_deadline = absl::Now() + config_.handshake_timeout;
    c->nonce = RandomNonce();
    c->challenged = absl::Now();
    SetNoDelay(fd).IgnoreError();
    loop_->Watch(fd, epoll_data_t{.u64 = static_cast<uint64_t>(fd)}, EPOLLIN);
    Connection& ref = *c;
    connections_[fd] = std::move(c);
    Send(ref, FrameType::kChallenge, SerializeString(ref.nonce));
  }
}

int Coordinator::Unauthenticated() const {
  return static_cast<int>(
      std::count_if(connections_.begin(), connections_.end(),
                    [](const auto& c) { return c.second->rank == -1 && !c.second->waiting; }));
}

void Coordinator::ShedOldestUnauthenticated(const std::string& why) {
  const Connection* oldest = nullptr;
  for (const auto& [fd, c] : connections_) {
    if (c->rank == -1 && !c->waiting &&
        (oldest == nullptr || c->handshake_deadline < oldest->handshake_deadline)) {
      oldest = c.get();
    }
  }
  if (oldest == nullptr) return;
  rejections_.Add(oldest->peer, absl::StrFormat("dropped before its handshake: %s", why));
  Drop(oldest->fd.get(), why);
}

void Coordinator::Send(Connection& c, FrameType type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> bytes = EncodeControlFrame(type, payload, table_.epoch);
  if (c.closing) return;
  if (c.out.size() - c.out_offset + bytes.size() > kMaxQueuedBytes) {
    // A client that does not read its answers loses its connection.
    c.closing = true;
    c.drop_at = absl::Now();
    return;
  }
  c.out.insert(c.out.end(), bytes.begin(), bytes.end());
  Flush(c);
}

void Coordinator::Flush(Connection& c) {
  for (;;) {
    IoResult r;
    if (c.io->pending_output()) {
      r = c.io->Flush();
    } else if (c.out_offset < c.out.size()) {
      const iovec unsent{c.out.data() + c.out_offset, c.out.size() - c.out_offset};
      r = c.io->Write(std::span<const iovec>(&unsent, 1));
      if (r.kind == IoResult::kDone) c.out_offset += r.bytes;
    } else {
      break;
    }
    if (r.kind == IoResult::kWouldBlock) break;
    if (r.kind != IoResult::kDone) {
      c.closing = true;
      c.drop_at = absl::Now();
      c.out.clear();
      c.out_offset = 0;
      break;
    }
  }
  const bool unsent = c.out_offset < c.out.size() || c.io->pending_output();
  if (!unsent) {
    c.out.clear();
    c.out_offset = 0;
    if (c.closing) shutdown(c.fd.get(), SHUT_WR);
  }
  Watch(c, EPOLLIN | (unsent ? static_cast<uint32_t>(EPOLLOUT) : 0u));
}

void Coordinator::Watch(Connection& c, uint32_t events) {
  loop_->Modify(c.fd.get(), epoll_data_t{.u64 = static_cast<uint64_t>(c.fd.get())}, events);
}

bool Coordinator::ChooseProtection(Connection& c) {
  uint8_t first = 0;
  const ssize_t n = recv(c.fd.get(), &first, 1, MSG_PEEK);
  if (n <= 0) return n == 0 || (errno != EAGAIN && errno != EINTR);  // Closed: read says so.
  constexpr uint8_t kTlsHandshakeRecord = 0x16;
  if (first != kTlsHandshakeRecord) {
    if (c.tls_required) {
      Reject(c, absl::StrFormat(
                    "this coordinator requires TLS from %s (its option tls is %s): give the rank "
                    "tls=on, or the coordinator tls=off on a private network",
                    c.peer, TlsModeName(config_.tls.mode)));
      return false;
    }
    c.stage = Connection::Stage::kFrames;
    return true;
  }
  if (c.out_offset < c.out.size()) {
    rejections_.Add(c.peer, "started TLS before it had the challenge");
    Drop(c.fd.get(), "started TLS before it had the challenge");
    return false;
  }
  absl::StatusOr<std::unique_ptr<StreamIo>> io =
      tls_->Wrap(c.fd.get(), /*server=*/true, CoordinatorTlsKey(config_.token, c.nonce));
  if (!io.ok()) {
    Drop(c.fd.get(), std::string(io.status().message()));
    return false;
  }
  c.io = *std::move(io);
  c.stage = Connection::Stage::kTlsHandshake;
  return AdvanceTls(c);
}

bool Coordinator::AdvanceTls(Connection& c) {
  absl::StatusOr<uint32_t> waits_for = c.io->Handshake();
  if (!waits_for.ok()) {
    // Nothing readable can be sent back: the client sees its handshake fail.
    rejections_.Add(c.peer, std::string(waits_for.status().message()));
    Drop(c.fd.get(), std::string(waits_for.status().message()));
    return false;
  }
  if (*waits_for != 0) {
    Watch(c, *waits_for);
    return false;
  }
  c.stage = Connection::Stage::kFrames;
  Watch(c, EPOLLIN);
  return true;
}

void Coordinator::OnReadable(Connection& c) {
  uint8_t buffer[64 << 10];
  const int fd = c.fd.get();
  if (!c.closing && c.stage == Connection::Stage::kChallenged && !ChooseProtection(c)) return;
  if (!c.closing && c.stage == Connection::Stage::kTlsHandshake && !AdvanceTls(c)) return;
  if (c.closing) {
    for (int i = 0; i < 16; ++i) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        Drop(fd, "closed after error");
        return;
      }
      if (n < 0) return;
    }
    return;
  }
  for (int reads = 0; reads < kReadsPerEvent; ++reads) {
    const IoResult r = c.io->Read(buffer, sizeof(buffer));
    if (r.kind == IoResult::kDone) {
      // Frames are handled as they complete, so that what is buffered stays one frame's worth.
      c.parser.Feed(std::span<const uint8_t>(buffer, r.bytes));
      if (!HandleFrames(c)) return;
      // TLS may hold decrypted bytes the socket will not signal again.
      if (r.bytes < sizeof(buffer) && !c.io->buffered()) break;
    } else if (r.kind == IoResult::kWouldBlock) {
      break;
    } else {
      const std::string reason =
          c.parser.buffered() > 0
              ? absl::StrFormat("connection closed inside a frame (%d bytes of it received)",
                                c.parser.buffered())
              : "connection closed";
      if (c.rank < 0 && c.parser.buffered() > 0) rejections_.Add(c.peer, reason);
      Drop(fd, reason);
      return;
    }
  }
}

bool Coordinator::HandleFrames(Connection& c) {
  for (;;) {
    absl::StatusOr<std::optional<Frame>> frame = c.parser.Next();
    if (!frame.ok()) {
      Reject(c, std::string(frame.status().message()));
      return false;
    }
    if (!frame->has_value()) return true;
    c.last_seen = absl::Now();
    if (absl::Status s = Handle(c, **frame); !s.ok()) {
      Reject(c, std::string(s.message()));
      return false;
    }
    if (c.closing) return false;
  }
}

void Coordinator::Reject(Connection& c, const std::string& reason) {
  rejections_.Add(c.peer, reason);
  Send(c, FrameType::kError, SerializeString(reason));
  c.closing = true;
  c.drop_at = absl::Now() + absl::Seconds(1);
  if (c.out.empty()) shutdown(c.fd.get(), SHUT_WR);
  if (c.rank >= 0) Drop(c.fd.get(), reason);
}

absl::Status Coordinator::Handle(Connection& c, const Frame& frame) {
  if (c.evicted) return absl::OkStatus();
  if (c.waiting) {
    return absl::FailedPreconditionError(
        absl::StrFormat("sent %s while waiting to be admitted", FrameTypeName(frame.header.type)));
  }
  if (c.rank < 0) {
    if (frame.header.type != FrameType::kJoin) {
      return absl::FailedPreconditionError(
          absl::StrFormat("expected a join frame first, got %s", FrameTypeName(frame.header.type)));
    }
    return HandleJoin(c, frame);
  }
  switch (frame.header.type) {
    case FrameType::kHeartbeat:
      return absl::OkStatus();
    case FrameType::kLeave: {
      Logf("coordinator", "rank %d left", c.rank);
      const int rank = c.rank;
      {
        MutexLock lock(&mu_);
        table_.peers[rank].alive = false;
        table_.peers[rank].joining = false;
        table_.peers[rank].failure = "left";
      }
      rank_fd_[rank] = -1;
      c.rank = -2;  // Departed cleanly: closing the socket is not a failure.
      NoteDeparture();
      if (rank == joining_) joining_ = -1;
      AdmitWaitingJoin();  // Its place is free.
      return absl::OkStatus();
    }
    case FrameType::kJoinReady: {
      if (c.rank != joining_) {
        return absl::FailedPreconditionError(
            absl::StrFormat("rank %d said it is ready to join, but it is not joining", c.rank));
      }
      absl::StatusOr<JoinedLinks> links = JoinedLinks::Parse(frame.payload);
      if (!links.ok()) return links.status();
      FinishJoin(c, *std::move(links));
      return absl::OkStatus();
    }
    case FrameType::kSuspect: {
      absl::StatusOr<Suspicion> m = Suspicion::Parse(frame.payload);
      if (!m.ok()) return m.status();
      if (m->rank != c.rank) {
        DeclareFailed(m->rank, m->epoch,
                      absl::StrFormat("reported by rank %d: %s", c.rank, m->cause));
      }
      return absl::OkStatus();
    }
    case FrameType::kKvPut: {
      absl::StatusOr<KvMessage> m = KvMessage::Parse(frame.payload);
      if (!m.ok()) return m.status();
      kv_[m->key] = m->value;
      NoteKey(m->key);
      KvMessage ack{.request = m->request, .key = m->key, .found = true};
      Send(c, FrameType::kKvValue, ack.Serialize());
      AnswerGets(m->key);
      return absl::OkStatus();
    }
    case FrameType::kKvGet: {
      absl::StatusOr<KvMessage> m = KvMessage::Parse(frame.payload);
      if (!m.ok()) return m.status();
      pending_gets_.push_back(PendingGet{c.fd.get(), c.id, m->request, m->key,
                                         absl::Now() + absl::Milliseconds(m->wait_ms)});
      AnswerGets(m->key);
      return absl::OkStatus();
    }
    default:
      return absl::FailedPreconditionError(absl::StrFormat("unexpected %s frame from a joined rank",
                                                           FrameTypeName(frame.header.type)));
  }
}

absl::Status Coordinator::HandleJoin(Connection& c, const Frame& frame) {
  absl::StatusOr<JoinRequest> join = JoinRequest::Parse(frame.payload);
  if (!join.ok()) return join.status();
  if (!ProofsEqual(join->proof, join->Proof(config_.token, c.nonce))) {
    return absl::PermissionDeniedError("authentication failed: wrong token");
  }
  c.parser.set_max_payload_bytes(kMaxControlPayloadBytes);  // Proven: full-size frames from now.
  if (join->world_id != config_.world_id) {
    return absl::PermissionDeniedError(
        absl::StrFormat("wrong world id: this coordinator serves '%s', the peer asked for '%s'",
                        config_.world_id, join->world_id));
  }
  if (join->world_size != 0 && join->world_size != config_.world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("world size mismatch: coordinator has %d ranks, the peer expects %d",
                        config_.world_size, join->world_size));
  }
  if (join->epoch > 0) return HandleRejoin(c, *join);
  if (recovering_) {
    return absl::UnavailableError(
        "this coordinator is rebuilding a running group from its ranks; try again later");
  }
  if (table().epoch > 0) {
    HandleLateJoin(c, *join);
    return absl::OkStatus();
  }
  int rank = join->rank;
  if (rank >= config_.world_size && rank < config_.max_ranks) {
    // One of the ranks an elastic group may grow to (hmcrun -np MIN:MAX): it joins once the
    // group has formed.
    HandleLateJoin(c, *join);
    return absl::OkStatus();
  }
  {
    MutexLock lock(&mu_);
    if (joined_ == config_.world_size) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("world '%s' is full (%d of %d ranks joined)", config_.world_id, joined_,
                          config_.world_size));
    }
    if (rank >= config_.world_size || rank < -1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("rank %d is outside a world of %d ranks", rank, config_.world_size));
    }
    if (rank >= 0 && rank_fd_[rank] >= 0) {
      return absl::AlreadyExistsError(absl::StrFormat("duplicate rank %d: already taken by %s",
                                                      rank, connections_[rank_fd_[rank]]->peer));
    }
    if (rank < 0) {
      // First come: the lowest rank that nobody asked for explicitly yet.
      for (rank = 0; rank < config_.world_size && rank_fd_[rank] >= 0; ++rank) {
      }
    }
    table_.peers[rank] = EntryOf(rank, *join);
  }
  Admit(c, rank, *join);
  Logf("coordinator", "rank %d joined from %s (zone %s, transport %s, protection %s), %d of %d",
       rank, c.peer, join->zone, ShortAddress(join->address), c.io->protection(), joined_,
       config_.world_size);
  if (joined_ == config_.world_size) {
    {
      MutexLock lock(&mu_);
      table_.epoch = 1;
    }
    epoch_began_[1] = {absl::Now(), "the group formed"};
    PublishTable();
    AdmitWaitingJoin();
  }
  return absl::OkStatus();
}

void Coordinator::Admit(Connection& c, int rank, const JoinRequest& join) {
  rank_fd_[rank] = c.fd.get();
  c.rank = rank;
  c.heartbeat_timeout = HeartbeatTimeout(config_.heartbeat_timeout, absl::Now() - c.challenged);
  ++joined_;
  Welcome welcome{rank, ids_given(), ""};
  welcome.proof = welcome.Proof(config_.token, join.nonce, c.nonce);
  Send(c, FrameType::kWelcome, welcome.Serialize());
}

absl::Status Coordinator::HandleRejoin(Connection& c, const JoinRequest& join) {
  const int rank = join.rank;
  // Ids past world_size belong to ranks that joined the running group before the restart.
  constexpr int kMaxIds = 1 << 16;
  if (rank < 0 || rank >= kMaxIds) {
    return absl::InvalidArgumentError(absl::StrFormat("rank %d is not a valid id", rank));
  }
  {
    MutexLock lock(&mu_);
    while (static_cast<int>(table_.peers.size()) <= rank) {
      const int id = static_cast<int>(table_.peers.size());
      table_.peers.push_back(PeerEntry{.rank = id, .alive = false, .failure = "not back yet"});
      table_.world_size = id + 1;
      rank_fd_.push_back(-1);
    }
    if (table_.epoch > 0 || rank_fd_[rank] >= 0) {
      // This coordinator has run the group all along: whoever lost it was declared failed.
      return absl::FailedPreconditionError(
          table_.epoch > 0 ? absl::StrFormat("rank %d was removed from the group at epoch %d (%s)",
                                             rank, table_.epoch, table_.peers[rank].failure)
                           : absl::StrFormat("rank %d is connected already", rank));
    }
    table_.peers[rank] = EntryOf(rank, join);
  }
  Admit(c, rank, join);
  ready_.insert(rank);  // It set up long ago, with the coordinator that is gone.
  // The newest epoch any returning rank knows decides who the group is.
  if (!recovering_ || join.epoch > recovery_epoch_) {
    recovering_ = true;
    recovery_epoch_ = join.epoch;
    recovery_members_.assign(join.members.begin(), join.members.end());
    recovery_deadline_ =
        absl::Now() + HeartbeatTimeout(config_.heartbeat_timeout, absl::Seconds(1));
  }
  Logf("coordinator", "rank %d came back from %s at epoch %d (%d ranks back)", rank, c.peer,
       join.epoch, joined_);
  FinishRecovery(/*deadline_passed=*/false);
  return absl::OkStatus();
}

void Coordinator::FinishRecovery(bool deadline_passed) {
  if (!recovering_) return;
  std::vector<int> missing;
  for (int id : recovery_members_) {
    if (id >= 0 && id < static_cast<int>(rank_fd_.size()) && rank_fd_[id] < 0) {
      missing.push_back(id);
    }
  }
  if (!missing.empty() && !deadline_passed) return;
  recovering_ = false;
  {
    MutexLock lock(&mu_);
    table_.epoch = recovery_epoch_ + (missing.empty() ? 0 : 1);
    for (PeerEntry& p : table_.peers) {
      const bool member = std::find(recovery_members_.begin(), recovery_members_.end(), p.rank) !=
                          recovery_members_.end();
      if (!member) {
        p.alive = false;
        p.failure = absl::StrFormat("not a member at epoch %d", recovery_epoch_);
      } else if (rank_fd_[p.rank] < 0) {
        p.alive = false;
        p.failure = "did not come back to the restarted coordinator";
      }
      if (!p.alive) ++departed_;
    }
  }
  Logf("coordinator", "rebuilt the group at epoch %d: %d ranks came back, %d did not",
       table().epoch, joined_, missing.size());
  epoch_began_[table().epoch] = {absl::Now(), "the coordinator restarted"};
  PublishTable();
  AdmitWaitingJoin();
}

void Coordinator::HandleLateJoin(Connection& c, const JoinRequest& join) {
  c.waiting = true;
  waiting_joins_.emplace_back(c.fd.get(), join);
  Logf("coordinator", "%s (zone %s) asks to join the running group", c.peer, join.zone);
  AdmitWaitingJoin();
}

void Coordinator::AdmitWaitingJoin() {
  const int max_ranks = std::max(config_.max_ranks, config_.world_size);
  while (joining_ < 0 && !recovering_ && !waiting_joins_.empty()) {
    std::vector<int> members;
    uint32_t epoch;
    {
      MutexLock lock(&mu_);
      members = table_.Members();
      epoch = table_.epoch;
    }
    const int live = static_cast<int>(members.size());
    // Held until the group forms, until there is room, until every member set up (a member
    // still probing its links in Communicator::Create runs collectives a new epoch would end),
    // and until training resumed in the last join's epoch.
    if (epoch == 0 || live >= max_ranks || epoch == join_epoch_) return;
    if (!std::all_of(members.begin(), members.end(), [&](int id) { return ready_.contains(id); })) {
      return;
    }
    auto [fd, join] = std::move(waiting_joins_.front());
    waiting_joins_.pop_front();
    Connection& c = *connections_.at(fd);  // Drop takes a closed connection off the queue.
    c.waiting = false;
    if (live == 0) {
      // Nobody to join and nobody to take the state from: the job is over.
      Reject(c, absl::StrFormat("world '%s' has no members left to join (it finished or failed)",
                                config_.world_id));
      continue;
    }
    int id;
    {
      MutexLock lock(&mu_);
      id = static_cast<int>(table_.peers.size());
      PeerEntry entry = EntryOf(id, join);
      entry.alive = false;
      entry.joining = true;
      table_.peers.push_back(entry);
      table_.world_size = id + 1;
    }
    rank_fd_.push_back(-1);
    joining_ = id;
    Admit(c, id, join);
    Logf("coordinator", "rank %d joins the running group from %s (zone %s, transport %s); %d live",
         id, c.peer, join.zone, ShortAddress(join.address), live);
    PublishTable();  // Same epoch: the members expect its connections, it learns who they are.
  }
}

void Coordinator::FinishJoin(Connection& c, JoinedLinks links) {
  uint32_t epoch;
  {
    MutexLock lock(&mu_);
    PeerEntry& p = table_.peers[c.rank];
    p.joining = false;
    p.alive = true;
    links.rtt_ms.resize(std::min(links.rtt_ms.size(), table_.peers.size()));
    p.joined = std::move(links);
    epoch = ++table_.epoch;
  }
  joining_ = -1;
  join_epoch_ = epoch;
  ready_.insert(c.rank);  // A joiner runs no setup collectives.
  Logf("coordinator", "rank %d joined the group; epoch %d", c.rank, epoch);
  epoch_began_[epoch] = {absl::Now(), absl::StrFormat("rank %d joined", c.rank)};
  PublishTable();
  AdmitWaitingJoin();
}

void Coordinator::NoteKey(const std::string& key) {
  const std::string ready = ReadyKeyPrefix(config_.world_id);
  if (int id; absl::StartsWith(key, ready) && absl::SimpleAtoi(key.substr(ready.size()), &id)) {
    ready_.insert(id);
    AdmitWaitingJoin();
    return;
  }
  const std::string prefix = ResumedKeyPrefix(config_.world_id);
  uint32_t epoch;
  if (!absl::StartsWith(key, prefix) || !absl::SimpleAtoi(key.substr(prefix.size()), &epoch)) {
    return;
  }
  if (epoch >= join_epoch_ && join_epoch_ > 0) {
    join_epoch_ = 0;
    AdmitWaitingJoin();
  }
  auto began = epoch_began_.find(epoch);
  if (began == epoch_began_.end() || epoch <= 1) return;
  Logf("coordinator", "epoch %d (%s): training resumed %s after the change", epoch,
       began->second.second, absl::FormatDuration(absl::Now() - began->second.first));
  epoch_began_.erase(began);
}

int Coordinator::ids_given() const {
  MutexLock lock(&mu_);
  return static_cast<int>(table_.peers.size());
}

void Coordinator::NoteDeparture() {
  ++departed_;
  if (departed_ == ids_given()) {
    MutexLock lock(&mu_);
    finished_ = true;
  }
}

void Coordinator::PublishTable() {
  PeerTable snapshot = table();
  const std::vector<uint8_t> payload = snapshot.Serialize();
  for (int fd : rank_fd_) {
    if (fd >= 0 && connections_.count(fd)) Send(*connections_[fd], FrameType::kPeerTable, payload);
  }
}

void Coordinator::AnswerGets(const std::string& key) {
  auto found = kv_.find(key);
  if (found == kv_.end()) return;
  for (auto it = pending_gets_.begin(); it != pending_gets_.end();) {
    if (it->key != key) {
      ++it;
      continue;
    }
    if (Connection* asker = Asker(*it)) {
      KvMessage answer{.request = it->request, .key = key, .value = found->second, .found = true};
      Send(*asker, FrameType::kKvValue, answer.Serialize());
    }
    it = pending_gets_.erase(it);
  }
}

Coordinator::Connection* Coordinator::Asker(const PendingGet& get) {
  auto it = connections_.find(get.fd);
  return it != connections_.end() && it->second->id == get.connection ? it->second.get() : nullptr;
}

void Coordinator::Drop(int fd, const std::string& reason) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  std::erase_if(pending_gets_,
                [id = it->second->id](const PendingGet& get) { return get.connection == id; });
  const int rank = it->second->rank;
  const bool evicted = it->second->evicted;  // Its failure was declared already.
  loop_->Unwatch(fd);
  connections_.erase(it);
  std::erase_if(waiting_joins_, [fd](const auto& waiting) { return waiting.first == fd; });
  if (rank < 0 || evicted) return;
  rank_fd_[rank] = -1;
  if (rank == joining_) {
    {
      MutexLock lock(&mu_);
      table_.peers[rank].joining = false;
      table_.peers[rank].failure = absl::StrFormat("left before it joined: %s", reason);
    }
    Logf("coordinator", "rank %d left before it joined: %s", rank, reason);
    joining_ = -1;
    NoteDeparture();
    PublishTable();  // The members close what it had opened.
    AdmitWaitingJoin();
    return;
  }
  bool forming;
  uint32_t epoch;
  {
    MutexLock lock(&mu_);
    forming = table_.epoch == 0;
    epoch = table_.epoch;
    // Still forming: the slot is free again.
    if (forming) table_.peers[rank] = PeerEntry{.rank = rank, .alive = false};
  }
  if (forming) {
    --joined_;
    Logf("coordinator", "rank %d disconnected before the world was complete: %s", rank, reason);
    return;
  }
  DeclareFailed(rank, epoch, reason);
}

void Coordinator::DeclareFailed(int rank, uint32_t epoch, const std::string& reason) {
  {
    MutexLock lock(&mu_);
    if (rank < 0 || rank >= static_cast<int>(table_.peers.size()) || epoch != table_.epoch ||
        !table_.peers[rank].alive) {
      return;  // Already handled, or about an epoch that ended.
    }
    table_.peers[rank].alive = false;
    table_.peers[rank].failure = reason;
    ++table_.epoch;
  }
  Logf("coordinator", "rank %d failed: %s; epoch %d", rank, reason, table().epoch);
  epoch_began_[table().epoch] = {absl::Now(), absl::StrFormat("rank %d failed: %s", rank, reason)};
  PublishTable();  // The failed rank, if it still listens, learns it was removed.
  if (const int fd = rank_fd_[rank]; fd >= 0) {
    connections_[fd]->evicted = true;
    rank_fd_[rank] = -1;
  }
  NoteDeparture();
  AdmitWaitingJoin();  // A slot is free.
}

void Coordinator::CheckTimers() {
  const absl::Time now = absl::Now();
  accept_->Tick(now);
  std::vector<std::pair<int, std::string>> expired;
  for (auto& [fd, c] : connections_) {
    if (c->closing) {
      if (now >= c->drop_at) expired.emplace_back(fd, "closed after error");
    } else if (c->rank == -1 && !c->waiting && now > c->handshake_deadline) {
      expired.emplace_back(fd, "handshake timed out");
    } else if (c->rank >= 0 && !c->evicted && now - c->last_seen > c->heartbeat_timeout) {
      expired.emplace_back(
          fd, absl::StrFormat("no heartbeat for %s", absl::FormatDuration(now - c->last_seen)));
    }
  }
  if (recovering_ && now > recovery_deadline_) FinishRecovery(/*deadline_passed=*/true);
  for (auto& [fd, reason] : expired) {
    if (reason == "handshake timed out") rejections_.Add(connections_[fd]->peer, reason);
    Drop(fd, reason);
  }
  for (auto it = pending_gets_.begin(); it != pending_gets_.end();) {
    if (now < it->deadline) {
      ++it;
      continue;
    }
    if (Connection* asker = Asker(*it)) {
      KvMessage answer{.request = it->request, .key = it->key, .found = false};
      Send(*asker, FrameType::kKvValue, answer.Serialize());
    }
    it = pending_gets_.erase(it);
  }
}

}  // namespace hmc
