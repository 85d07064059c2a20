#include "core/coordinator_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_format.h"
#include "core/auth.h"
#include "core/coordinator_protocol.h"
#include "core/frame_io.h"
#include "core/log.h"

namespace hmc {

CoordinatorClient::CoordinatorClient(const CoreOptions& options, TlsMode tls_mode,
                                     std::unique_ptr<TlsContext> tls)
    : options_(options),
      tls_mode_(tls_mode),
      tls_(std::move(tls)),
      coordinator_(options.coordinator) {}

absl::StatusOr<CoordinatorClient::Link> CoordinatorClient::Dial(absl::Time deadline) const {
  absl::StatusOr<SocketAddress> address = SocketAddress::Parse(coordinator_);
  if (!address.ok()) return address.status();
  absl::StatusOr<UniqueFd> fd;
  absl::Duration backoff = absl::Milliseconds(10);
  for (int attempt = 0;; ++attempt) {
    fd = ConnectTcp(*address, deadline);
    if (fd.ok() || absl::Now() + backoff >= deadline || attempt >= 1000) break;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
  if (!fd.ok()) {
    return absl::UnavailableError(
        absl::StrFormat("coordinator %s: %s", coordinator_, fd.status().message()));
  }
  Link link{.fd = std::move(*fd)};
  absl::StatusOr<Frame> challenge = ReadControlFrame(link.fd.get(), deadline);
  if (!challenge.ok() || challenge->header.type != FrameType::kChallenge) {
    return absl::UnavailableError(
        absl::StrFormat("coordinator %s: no valid challenge: %s", coordinator_,
                        challenge.ok() ? std::string(FrameTypeName(challenge->header.type))
                                       : std::string(challenge.status().message())));
  }
  absl::StatusOr<std::string> nonce = ParseString(challenge->payload);
  if (!nonce.ok()) return nonce.status();
  link.nonce = *std::move(nonce);
  absl::StatusOr<SocketAddress> self = SocketAddress::LocalOf(link.fd.get());
  if (self.ok() && !WantsTls(tls_mode_, *self, *address)) {
    link.io = std::make_unique<SocketIo>(link.fd.get());
    return link;
  }
  absl::StatusOr<std::unique_ptr<StreamIo>> io =
      tls_->Wrap(link.fd.get(), /*server=*/false, CoordinatorTlsKey(options_.token, link.nonce));
  if (!io.ok()) return io.status();
  link.io = *std::move(io);
  if (absl::Status s = link.io->FinishHandshake(deadline); !s.ok()) {
    // Refused by the coordinator (another token, another CA) or cut: either way, no join.
    return absl::Status(s.code(), absl::StrFormat("coordinator %s: %s", coordinator_, s.message()));
  }
  return link;
}

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Connect(
    const CoreOptions& options) {
  if (options.coordinator.empty()) {
    return absl::InvalidArgumentError(
        "no coordinator address (set HMC_COORDINATOR or --coordinator)");
  }
  if (absl::Status s = RequireToken(options.token, options.insecure, "rank"); !s.ok()) return s;
  absl::StatusOr<TlsConfig> tls_config = TlsConfigFrom(options);
  if (!tls_config.ok()) return tls_config.status();
  absl::StatusOr<std::unique_ptr<TlsContext>> tls = TlsContext::Create(*tls_config);
  if (!tls.ok()) return tls.status();
  std::unique_ptr<CoordinatorClient> client(
      new CoordinatorClient(options, tls_config->mode, *std::move(tls)));
  absl::StatusOr<Link> link = client->Dial(absl::Now() + options.connect_timeout);
  if (!link.ok()) return link.status();
  absl::StatusOr<SocketAddress> local = SocketAddress::LocalOf(link->fd.get());
  if (!local.ok()) return local.status();
  client->local_ = *local;
  MutexLock lock(&client->io_mu_);
  client->link_ = *std::move(link);
  return client;
}

absl::Status CoordinatorClient::Join(const std::string& transport_address, absl::Time deadline) {
  transport_address_ = transport_address;
  absl::StatusOr<Welcome> welcome;
  {
    MutexLock lock(&io_mu_);
    welcome = Handshake(link_, 0, {}, deadline);
  }
  if (!welcome.ok()) return welcome.status();
  rank_ = welcome->rank;
  world_size_ = welcome->world_size;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

absl::StatusOr<Welcome> CoordinatorClient::Handshake(Link& link, uint32_t epoch,
                                                     const std::vector<int32_t>& members,
                                                     absl::Time deadline) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  JoinRequest join;
  join.world_id = options_.world_id;
  join.rank = epoch > 0 ? rank_ : static_cast<int32_t>(options_.rank);
  join.world_size = static_cast<int32_t>(options_.world_size);
  join.address = transport_address_;
  join.zone = options_.zone;
  join.hostname = host;
  join.cpus = static_cast<int32_t>(sysconf(_SC_NPROCESSORS_ONLN));
  join.nonce = RandomNonce();
  join.epoch = epoch;
  join.members = members;
  join.proof = join.Proof(options_.token, link.nonce);
  if (absl::Status s = WriteControlFrame(*link.io, FrameType::kJoin, join.Serialize(), deadline);
      !s.ok()) {
    return absl::UnavailableError(
        absl::StrFormat("coordinator %s: sending join: %s", coordinator_, s.message()));
  }
  absl::StatusOr<Frame> reply = ReadControlFrame(*link.io, deadline);
  if (!reply.ok() && epoch == 0 && absl::IsDeadlineExceeded(reply.status())) {
    // A running group holds a join while it has max_ranks members or another rank is joining.
    return absl::DeadlineExceededError(absl::StrFormat(
        "coordinator %s did not admit this rank before the deadline (a running group admits a "
        "rank when it has room for it, max_ranks)",
        coordinator_));
  }
  if (!reply.ok()) {
    return absl::UnavailableError(absl::StrFormat("coordinator %s: no answer to join: %s",
                                                  coordinator_, reply.status().message()));
  }
  if (reply->header.type == FrameType::kError) {
    absl::StatusOr<std::string> message = ParseString(reply->payload);
    return absl::PermissionDeniedError(
        absl::StrFormat("coordinator %s refused to join: %s", coordinator_,
                        message.ok() ? *message : std::string("(unreadable error)")));
  }
  if (reply->header.type != FrameType::kWelcome) {
    return absl::DataLossError(absl::StrFormat("coordinator %s: unexpected %s frame", coordinator_,
                                               FrameTypeName(reply->header.type)));
  }
  absl::StatusOr<Welcome> welcome = Welcome::Parse(reply->payload);
  if (!welcome.ok()) return welcome.status();
  if (!ProofsEqual(welcome->proof, welcome->Proof(options_.token, join.nonce, link.nonce))) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "coordinator %s failed to prove the token: wrong token or not an hmc coordinator",
        coordinator_));
  }
  return welcome;
}

absl::Status CoordinatorClient::Reconnect() {
  const absl::Time give_up = absl::Now() + options_.connect_timeout;
  uint32_t epoch = 0;
  std::vector<int32_t> members;
  {
    MutexLock lock(&mu_);
    if (table_.has_value()) {
      epoch = table_->epoch;
      for (int id : table_->Members()) members.push_back(id);
    }
  }
  if (epoch == 0) return absl::UnavailableError("lost before the group was complete");
  absl::Status last = absl::DeadlineExceededError("no time left to reconnect");
  while (absl::Now() < give_up) {
    {
      MutexLock lock(&mu_);
      if (stopping_ || left_) return absl::CancelledError("stopping");
    }
    absl::StatusOr<Link> dialed = Dial(std::min(give_up, absl::Now() + absl::Seconds(2)));
    if (!dialed.ok()) {
      last = dialed.status();
      continue;  // Dial itself backs off while the address refuses.
    }
    absl::StatusOr<Welcome> welcome =
        Handshake(*dialed, epoch, members, absl::Now() + absl::Seconds(10));
    if (absl::IsUnavailable(welcome.status())) {
      last = welcome.status();  // The connection broke (a coordinator restarting again): redial.
      continue;
    }
    if (!welcome.ok()) return welcome.status();  // Refused: this rank is no longer a member.
    {
      MutexLock lock(&io_mu_);
      link_ = *std::move(dialed);
    }
    Logf("client", "rank %d: back with the coordinator %s at epoch %d", rank_, coordinator_, epoch);
    std::vector<std::pair<FrameType, std::vector<uint8_t>>> again;
    {
      MutexLock lock(&mu_);
      for (const auto& [id, request] : requests_) {
        if (!request.answer.has_value()) again.emplace_back(request.type, request.payload);
      }
    }
    for (const auto& [type, payload] : again) {
      // A failure here is the new connection failing: the reader finds out and comes back again.
      Write(type, payload, absl::Now() + absl::Seconds(10)).IgnoreError();
    }
    return absl::OkStatus();
  }
  return last;
}

CoordinatorClient::~CoordinatorClient() {
  Leave();
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CoordinatorClient::Leave() {
  {
    MutexLock lock(&mu_);
    if (left_ || rank_ < 0 || !broken_.ok()) return;
    left_ = true;
  }
  Write(FrameType::kLeave, {}, absl::Now() + absl::Seconds(2)).IgnoreError();
}

absl::Status CoordinatorClient::Write(FrameType type, const std::vector<uint8_t>& payload,
                                      absl::Time deadline) {
  MutexLock lock(&io_mu_);
  return WriteControlFrame(*link_.io, type, payload, deadline);
}

void CoordinatorClient::Shutdown(const absl::Status& why) {
  MembershipCallback callback;
  {
    MutexLock lock(&mu_);
    if (!broken_.ok()) return;
    broken_ = why;
    if (!stopping_ && !left_) callback = callback_;
  }
  if (callback) {
    Logf("client", "rank %d: %s", rank_, why.message());
    callback(PeerTable{});
  }
}

void CoordinatorClient::Run() {
  FrameParser parser;
  absl::Time next_heartbeat = absl::Now();
  uint8_t buffer[16 << 10];
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (!HeartbeatIfDue(parser, next_heartbeat)) return;
    int fd;
    bool buffered;
    {
      MutexLock lock(&io_mu_);
      fd = link_.fd.get();
      buffered = link_.io->buffered();
    }
    // The lock is not held while waiting: other threads write meanwhile.
    pollfd p{fd, POLLIN, 0};
    const int timeout = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(next_heartbeat - absl::Now()), 1, 100));
    if (!buffered && poll(&p, 1, timeout) <= 0) continue;
    IoResult read;
    {
      MutexLock lock(&io_mu_);
      read = link_.io->Read(buffer, sizeof(buffer));
    }
    if (read.kind == IoResult::kWouldBlock) continue;
    if (read.kind != IoResult::kDone) {
      if (!ComeBack(read.kind == IoResult::kClosed ? "connection closed" : read.error, parser)) {
        return;
      }
      continue;
    }
    parser.Feed(std::span<const uint8_t>(buffer, read.bytes));
    for (;;) {
      absl::StatusOr<std::optional<Frame>> frame = parser.Next();
      if (!frame.ok()) {
        Shutdown(absl::DataLossError(absl::StrFormat("coordinator %s sent a bad frame: %s",
                                                     coordinator_, frame.status().message())));
        return;
      }
      if (!frame->has_value()) break;
      if (!HandleFrame(**frame)) return;
    }
  }
}

bool CoordinatorClient::HeartbeatIfDue(FrameParser& parser, absl::Time& next_heartbeat) {
  const absl::Time now = absl::Now();
  if (now < next_heartbeat) return true;
  next_heartbeat = now + options_.heartbeat_interval;
  {
    MutexLock lock(&mu_);
    if (left_) return true;
  }
  absl::Status s = Write(FrameType::kHeartbeat, {},
                         now + HeartbeatTimeout(options_.heartbeat_timeout, absl::ZeroDuration()));
  return s.ok() || ComeBack(s.message(), parser);
}

bool CoordinatorClient::HandleFrame(const Frame& f) {
  if (f.header.type == FrameType::kPeerTable) {
    absl::StatusOr<PeerTable> table = PeerTable::Parse(f.payload);
    if (!table.ok()) {
      Shutdown(table.status());
      return false;
    }
    MembershipCallback callback;
    {
      MutexLock lock(&mu_);
      if (table_.has_value()) callback = callback_;
      table_ = *table;
    }
    if (callback) callback(*table);
  } else if (f.header.type == FrameType::kKvValue) {
    absl::StatusOr<KvMessage> m = KvMessage::Parse(f.payload);
    if (!m.ok()) {
      Shutdown(m.status());
      return false;
    }
    MutexLock lock(&mu_);
    if (auto it = requests_.find(m->request); it != requests_.end()) {
      it->second.answer = std::make_pair(m->found, m->value);
    }
  } else if (f.header.type == FrameType::kError) {
    absl::StatusOr<std::string> message = ParseString(f.payload);
    Shutdown(absl::AbortedError(
        absl::StrFormat("coordinator %s: %s", coordinator_, message.ok() ? *message : "error")));
    return false;
  }
  return true;
}

bool CoordinatorClient::ComeBack(absl::string_view cause, FrameParser& parser) {
  {
    MutexLock lock(&mu_);
    if (stopping_ || left_) return false;  // It closed because this rank is done.
  }
  Logf("client", "rank %d: lost the coordinator %s (%s); reconnecting", rank_, coordinator_, cause);
  absl::Status back = Reconnect();
  if (back.ok()) {
    parser = FrameParser();
    return true;
  }
  Shutdown(absl::UnavailableError(
      absl::StrFormat("lost the coordinator %s: %s; %s", coordinator_, cause, back.message())));
  return false;
}

absl::StatusOr<PeerTable> CoordinatorClient::WaitForPeers(absl::Time deadline) {
  MutexLock lock(&mu_);
  auto ready = [this]()
                   ABSL_SHARED_LOCKS_REQUIRED(mu_) { return table_.has_value() || !broken_.ok(); };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrFormat("rank %d: timed out waiting for all %d ranks to join coordinator %s", rank_,
                        world_size_, coordinator_));
  }
  if (!table_.has_value()) return broken_;
  return *table_;
}

absl::StatusOr<PeerTable> CoordinatorClient::FinishJoin(const JoinedLinks& links,
                                                        absl::Time deadline) {
  if (absl::Status s = Write(FrameType::kJoinReady, links.Serialize(), deadline); !s.ok()) {
    return s;
  }
  MutexLock lock(&mu_);
  auto decided = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !broken_.ok() || !table_->peers[rank_].joining;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&decided), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrFormat("rank %d: coordinator %s did not make it a member before the deadline",
                        rank_, coordinator_));
  }
  if (!broken_.ok()) return broken_;
  if (!table_->peers[rank_].alive) {
    return absl::UnavailableError(absl::StrFormat("rank %d could not join the group: %s", rank_,
                                                  table_->peers[rank_].failure));
  }
  return *table_;
}

PeerTable CoordinatorClient::table() const {
  MutexLock lock(&mu_);
  return table_.value_or(PeerTable{});
}

void CoordinatorClient::SetMembershipCallback(MembershipCallback callback) {
  MutexLock lock(&mu_);
  callback_ = std::move(callback);
}

absl::Status CoordinatorClient::ReportFailure(uint32_t epoch, int rank, const std::string& cause) {
  {
    MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
  }
  Suspicion report{epoch, rank, cause};
  return Write(FrameType::kSuspect, report.Serialize(),
               absl::Now() + HeartbeatTimeout(options_.heartbeat_timeout, absl::ZeroDuration()));
}

absl::StatusOr<uint64_t> CoordinatorClient::SendRequest(FrameType type, const std::string& key,
                                                        const std::string& value,
                                                        absl::Time deadline) {
  KvMessage m{.key = key, .value = value};
  m.wait_ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
  std::vector<uint8_t> payload;
  {
    MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
    m.request = next_request_++;
    payload = m.Serialize();
    requests_[m.request] = {type, payload, std::nullopt};
  }
  if (absl::Status written = Write(type, payload, deadline); !written.ok()) {
    MutexLock lock(&mu_);
    requests_.erase(m.request);
    return written;
  }
  return m.request;
}

absl::StatusOr<std::string> CoordinatorClient::AwaitAnswer(uint64_t request, const std::string& key,
                                                           absl::Time deadline) {
  MutexLock lock(&mu_);
  auto answered = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return requests_[request].answer.has_value() || !broken_.ok();
  };
  // The server answers a Get at its deadline; allow a second for the answer to arrive.
  const bool done = mu_.AwaitWithDeadline(absl::Condition(&answered), deadline + absl::Seconds(1));
  std::optional<std::pair<bool, std::string>> answer = requests_[request].answer;
  requests_.erase(request);
  if (!broken_.ok()) return broken_;
  if (!done || !answer.has_value() || !answer->first) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "key '%s' not available from coordinator %s before the deadline", key, coordinator_));
  }
  return answer->second;
}

absl::StatusOr<std::string> CoordinatorClient::Request(FrameType type, const std::string& key,
                                                       const std::string& value,
                                                       absl::Time deadline) {
  absl::StatusOr<uint64_t> request = SendRequest(type, key, value, deadline);
  if (!request.ok()) return request.status();
  return AwaitAnswer(*request, key, deadline);
}

absl::Status CoordinatorClient::Put(const std::string& key, const std::string& value,
                                    absl::Time deadline) {
  return Request(FrameType::kKvPut, key, value, deadline).status();
}

absl::StatusOr<std::string> CoordinatorClient::Get(const std::string& key, absl::Time deadline) {
  return Request(FrameType::kKvGet, key, "", deadline);
}

std::vector<absl::StatusOr<std::string>> CoordinatorClient::GetMany(
    const std::vector<std::string>& keys, absl::Time deadline) {
  std::vector<absl::StatusOr<uint64_t>> requests;
  for (const std::string& key : keys) {
    requests.push_back(SendRequest(FrameType::kKvGet, key, "", deadline));
  }
  std::vector<absl::StatusOr<std::string>> values;
  for (size_t i = 0; i < keys.size(); ++i) {
    values.push_back(requests[i].ok() ? AwaitAnswer(*requests[i], keys[i], deadline)
                                      : absl::StatusOr<std::string>(requests[i].status()));
  }
  return values;
}

}  // namespace hmc
