// The coordinator over real sockets on 127.0.0.1: joins, refusals, key-value store, heartbeats and
// input that is not the protocol at all.
#include "core/coordinator.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <functional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/auth.h"
#include "core/coordinator_client.h"
#include "core/coordinator_protocol.h"
#include "core/mutex.h"
#include "tests/testing/raw_socket.h"
#include "transports/request.h"

namespace hmc {
namespace {

using testing_util::Dial;
using testing_util::ReadUntilClosed;
using testing_util::SendBytes;

class CoordinatorTest : public testing::Test {
 protected:
  void StartCoordinator(int world_size, absl::Duration heartbeat_timeout = absl::Seconds(10),
                        int max_ranks = 0) {
    CoordinatorConfig config;
    config.world_size = world_size;
    config.max_ranks = max_ranks;
    config.token = "secret";
    config.world_id = "w";
    config.heartbeat_timeout = heartbeat_timeout;
    config.handshake_timeout = absl::Seconds(2);
    auto c = Coordinator::Start(config);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
  }

  CoreOptions ClientOptions(int rank = -1, std::string token = "secret") {
    CoreOptions o;
    o.coordinator = coordinator_->address().ToString();
    o.token = std::move(token);
    o.world_id = "w";
    o.rank = rank;
    o.heartbeat_interval = absl::Milliseconds(100);
    o.connect_timeout = absl::Seconds(10);
    return o;
  }

  absl::StatusOr<std::unique_ptr<CoordinatorClient>> Join(
      const CoreOptions& o, const std::string& address = "a:1",
      absl::Duration timeout = absl::Seconds(10)) {
    auto client = CoordinatorClient::Connect(o);
    if (!client.ok()) return client.status();
    if (absl::Status s = (*client)->Join(address, absl::Now() + timeout); !s.ok()) {
      return s;
    }
    return client;
  }

  // `n` ranks that formed a running group, each having said it finished setting up (as its
  // first Average does), so that ranks may join.
  std::vector<std::unique_ptr<CoordinatorClient>> RunningGroup(int n) {
    std::vector<std::unique_ptr<CoordinatorClient>> members;
    for (int r = 0; r < n; ++r) {
      auto c = Join(ClientOptions(r), absl::StrCat("m:", r));
      EXPECT_TRUE(c.ok()) << c.status();
      if (!c.ok()) return {};
      members.push_back(std::move(*c));
    }
    EXPECT_TRUE(members[0]->WaitForPeers(absl::Now() + absl::Seconds(10)).ok());
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(
          members[r]
              ->Put(absl::StrCat(ReadyKeyPrefix("w"), r), "", absl::Now() + absl::Seconds(5))
              .ok());
    }
    return members;
  }

  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(CoordinatorTest, AssignsRanksAndPublishesThePeerTable) {
  StartCoordinator(3);
  auto explicit_rank = Join(ClientOptions(2), "10.0.0.2:1");
  ASSERT_TRUE(explicit_rank.ok()) << explicit_rank.status();
  auto first = Join(ClientOptions(), "10.0.0.0:1");
  auto second = Join(ClientOptions(), "10.0.0.1:1");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ((*explicit_rank)->rank(), 2);
  EXPECT_EQ((*first)->rank(), 0);
  EXPECT_EQ((*second)->rank(), 1);
  auto table = (*first)->WaitForPeers(absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->epoch, 1u);
  ASSERT_EQ(table->peers.size(), 3u);
  EXPECT_EQ(table->peers[2].address, "10.0.0.2:1");
  EXPECT_EQ(table->peers[1].address, "10.0.0.1:1");
  // Each rank's host and its CPUs, which the tuner reads (ranks that share cores).
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  for (const PeerEntry& p : table->peers) {
    EXPECT_FALSE(p.hostname.empty());
    EXPECT_EQ(p.cpus, cpus);
  }
}

// A rank's report that a peer failed on the data path starts the next epoch without that peer,
// which learns it was removed; a report about an epoch that already ended changes nothing.
TEST_F(CoordinatorTest, ReportedFailureStartsTheNextEpoch) {
  StartCoordinator(3);
  std::vector<std::unique_ptr<CoordinatorClient>> clients;
  for (int r = 0; r < 3; ++r) {
    auto c = Join(ClientOptions(r));
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(std::move(*c));
  }
  Mutex mu;
  std::vector<PeerTable> seen;  // By rank 0.
  clients[0]->SetMembershipCallback([&](const PeerTable& t) {
    MutexLock lock(&mu);
    seen.push_back(t);
  });
  ASSERT_TRUE(clients[0]->WaitForPeers(absl::Now() + absl::Seconds(10)).ok());
  ASSERT_TRUE(clients[0]->ReportFailure(1, 2, "connection reset").ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (coordinator_->table().epoch < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  // Sent once epoch 2 began: the two reports travel on different connections, and sent together
  // the late one could arrive first (it did, under ASan) and be a valid report about epoch 1.
  ASSERT_TRUE(clients[1]->ReportFailure(1, 0, "too late: epoch 1 ended").ok());
  absl::SleepFor(absl::Milliseconds(200));  // Time for a wrong second epoch to show.
  const PeerTable table = coordinator_->table();
  EXPECT_EQ(table.epoch, 2u);
  EXPECT_TRUE(table.peers[0].alive);
  EXPECT_TRUE(table.peers[1].alive);
  EXPECT_FALSE(table.peers[2].alive);
  EXPECT_EQ(table.peers[2].failure, "reported by rank 0: connection reset");
  MutexLock lock(&mu);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().epoch, 2u);
}

TEST_F(CoordinatorTest, RefusesWrongTokenWorldDuplicateAndFullWorld) {
  StartCoordinator(1);
  auto wrong_token = Join(ClientOptions(-1, "guess"));
  ASSERT_FALSE(wrong_token.ok());
  EXPECT_TRUE(absl::StrContains(wrong_token.status().message(), "wrong token"))
      << wrong_token.status();
  CoreOptions other_world = ClientOptions();
  other_world.world_id = "v";
  auto wrong_world = Join(other_world);
  ASSERT_FALSE(wrong_world.ok());
  EXPECT_TRUE(absl::StrContains(wrong_world.status().message(), "wrong world id"))
      << wrong_world.status();
  auto member = Join(ClientOptions(0));
  ASSERT_TRUE(member.ok()) << member.status();
  // The group runs with its one rank, at max_ranks: a join waits for room until its deadline.
  auto full = Join(ClientOptions(), "a:2", absl::Seconds(1));
  ASSERT_FALSE(full.ok());
  EXPECT_TRUE(absl::StrContains(full.status().message(), "did not admit this rank"))
      << full.status();
  EXPECT_GE(coordinator_->rejections().size(), 2u);
}

TEST_F(CoordinatorTest, RankJoiningARunningGroupBecomesAMemberInTheNextEpoch) {
  StartCoordinator(2, absl::Seconds(10), /*max_ranks=*/3);
  std::vector<std::unique_ptr<CoordinatorClient>> members = RunningGroup(2);
  ASSERT_EQ(members.size(), 2u);
  // It asks for rank 0, which is taken: a joiner gets the next id.
  auto joiner = Join(ClientOptions(0), "j:2");
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  EXPECT_EQ((*joiner)->rank(), 2);
  auto announced = (*joiner)->WaitForPeers(absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(announced.ok()) << announced.status();
  EXPECT_EQ(announced->epoch, 1u);
  ASSERT_EQ(announced->peers.size(), 3u);
  EXPECT_TRUE(announced->peers[2].joining);
  EXPECT_FALSE(announced->peers[2].alive);
  EXPECT_EQ(announced->peers[2].address, "j:2");
  // What it measured of its links on the way travels with the table.
  const JoinedLinks measured{.probe = 77, .rtt_ms = {12.5, 0, -1}};
  auto joined = (*joiner)->FinishJoin(measured, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->epoch, 2u);
  EXPECT_EQ(joined->Members(), (std::vector<int>{0, 1, 2}));
  // The members heard of it too.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (members[1]->table().epoch < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const PeerTable seen = members[1]->table();
  EXPECT_EQ(seen.Members(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(seen.peers[2].joined.probe, 77u);
  EXPECT_EQ(seen.peers[2].joined.rtt_ms, measured.rtt_ms);
}

TEST_F(CoordinatorTest, FullGroupHoldsAJoinUntilAMemberLeaves) {
  StartCoordinator(2);
  std::vector<std::unique_ptr<CoordinatorClient>> members = RunningGroup(2);
  ASSERT_EQ(members.size(), 2u);
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> joiner;
  std::thread join([&] { joiner = Join(ClientOptions(), "j:2", absl::Seconds(20)); });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(coordinator_->table().peers.size(), 2u);  // Held: no id given yet.
  members[1]->Leave();
  join.join();
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  EXPECT_EQ((*joiner)->rank(), 2);
  // A joiner that goes away before it is ready leaves the group as it was.
  joiner->reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (coordinator_->table().peers[2].failure.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const PeerTable table = coordinator_->table();
  EXPECT_EQ(table.epoch, 1u);
  EXPECT_FALSE(table.peers[2].alive);
  EXPECT_FALSE(table.peers[2].joining);
  EXPECT_EQ(table.Members(), (std::vector<int>{0}));
}

TEST_F(CoordinatorTest, DuplicateRankWhileForming) {
  StartCoordinator(2);
  auto member = Join(ClientOptions(1));
  ASSERT_TRUE(member.ok());
  auto duplicate = Join(ClientOptions(1));
  ASSERT_FALSE(duplicate.ok());
  EXPECT_TRUE(absl::StrContains(duplicate.status().message(), "duplicate rank 1"))
      << duplicate.status();
}

TEST_F(CoordinatorTest, ClientRefusesACoordinatorThatCannotProveTheToken) {
  // A coordinator with another token: the client's own proof fails first, and the coordinator
  // never learns the client's token.
  StartCoordinator(1);
  auto joined = Join(ClientOptions(-1, "not-secret"));
  EXPECT_FALSE(joined.ok());
}

TEST_F(CoordinatorTest, KeyValueStoreWaitsForKeys) {
  StartCoordinator(2);
  auto a = Join(ClientOptions());
  auto b = Join(ClientOptions());
  ASSERT_TRUE(a.ok() && b.ok());
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_TRUE((*a)->Put("bootstrap", "value-1", absl::Now() + absl::Seconds(5)).ok());
  });
  auto value = (*b)->Get("bootstrap", absl::Now() + absl::Seconds(10));
  writer.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "value-1");
  auto missing = (*b)->Get("never", absl::Now() + absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(missing.status())) << missing.status();
  // Many keys in one round trip: each answered in its own slot, a missing one at the deadline.
  ASSERT_TRUE((*a)->Put("second", "value-2", absl::Now() + absl::Seconds(5)).ok());
  std::vector<absl::StatusOr<std::string>> many =
      (*b)->GetMany({"second", "never", "bootstrap"}, absl::Now() + absl::Milliseconds(300));
  ASSERT_EQ(many.size(), 3u);
  ASSERT_TRUE(many[0].ok() && many[2].ok());
  EXPECT_EQ(*many[0], "value-2");
  EXPECT_EQ(*many[2], "value-1");
  EXPECT_TRUE(absl::IsDeadlineExceeded(many[1].status())) << many[1].status();
}

// A join spoken by hand on a raw socket; `tamper` may change the request after its proof was
// computed (an on-path attacker). Returns the socket and the coordinator's answer.
std::pair<UniqueFd, absl::StatusOr<Frame>> RawJoinAnswer(
    const SocketAddress& coordinator, const std::string& token,
    const std::function<void(JoinRequest&)>& tamper = nullptr) {
  UniqueFd fd = testing_util::Dial(coordinator);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<Frame> challenge = ReadControlFrame(fd.get(), deadline);
  if (!challenge.ok()) return {std::move(fd), challenge.status()};
  absl::StatusOr<std::string> server_nonce = ParseString(challenge->payload);
  JoinRequest join;
  join.world_id = "w";
  join.address = "raw:1";
  join.zone = "z";
  join.nonce = RandomNonce();
  join.proof = join.Proof(token, *server_nonce);
  if (tamper) tamper(join);
  EXPECT_TRUE(WriteControlFrame(fd.get(), FrameType::kJoin, join.Serialize(), deadline).ok());
  absl::StatusOr<Frame> answer = ReadControlFrame(fd.get(), deadline);
  return {std::move(fd), std::move(answer)};
}

// A rank joined by hand, so that the test decides when it closes and whether it heartbeats.
UniqueFd RawJoin(const SocketAddress& coordinator, const std::string& token) {
  auto [fd, welcome] = RawJoinAnswer(coordinator, token);
  EXPECT_TRUE(welcome.ok() && welcome->header.type == FrameType::kWelcome);
  return std::move(fd);
}

// The join proof covers everything the rank asserts: an address, zone, world size or CPU count
// changed on the way is refused like a wrong token.
TEST_F(CoordinatorTest, AJoinChangedOnTheWayIsRefused) {
  StartCoordinator(2);
  for (const auto& tamper : std::vector<std::function<void(JoinRequest&)>>{
           [](JoinRequest& j) { j.address = "evil:1"; }, [](JoinRequest& j) { j.zone = "other"; },
           [](JoinRequest& j) { j.world_size = 2; }, [](JoinRequest& j) { j.rank = 1; },
           [](JoinRequest& j) { j.cpus = 1024; }}) {
    auto [fd, answer] = RawJoinAnswer(coordinator_->address(), "secret", tamper);
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->header.type, FrameType::kError);
    EXPECT_TRUE(absl::StrContains(*ParseString(answer->payload), "authentication failed"));
  }
  auto [fd, welcome] = RawJoinAnswer(coordinator_->address(), "secret");
  ASSERT_TRUE(welcome.ok());
  EXPECT_EQ(welcome->header.type, FrameType::kWelcome);
}

// The welcome's proof covers the rank and world size it assigns: a coordinator impersonator on
// the path that rewrites them is refused by the client.
TEST(CoordinatorAuth, AWelcomeChangedOnTheWayIsRefused) {
  auto bind = SocketAddress::Parse("127.0.0.1:0");
  absl::StatusOr<UniqueFd> listener = ListenTcp(*bind);
  ASSERT_TRUE(listener.ok());
  auto address = SocketAddress::LocalOf(listener->get());
  ASSERT_TRUE(address.ok());
  std::thread fake([&] {  // Proves the token, then rewrites the rank it assigns.
    pollfd p{listener->get(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1);
    UniqueFd fd(accept4(listener->get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    const std::string nonce = RandomNonce();
    ASSERT_TRUE(
        WriteControlFrame(fd.get(), FrameType::kChallenge, SerializeString(nonce), deadline).ok());
    absl::StatusOr<Frame> frame = ReadControlFrame(fd.get(), deadline);
    ASSERT_TRUE(frame.ok());
    absl::StatusOr<JoinRequest> join = JoinRequest::Parse(frame->payload);
    ASSERT_TRUE(join.ok());
    Welcome welcome{0, 4, ""};
    welcome.proof = welcome.Proof("secret", join->nonce, nonce);
    welcome.rank = 3;
    ASSERT_TRUE(
        WriteControlFrame(fd.get(), FrameType::kWelcome, welcome.Serialize(), deadline).ok());
    testing_util::ReadUntilClosed(fd.get());
  });
  CoreOptions o;
  o.coordinator = address->ToString();
  o.token = "secret";
  o.world_id = "w";
  auto client = CoordinatorClient::Connect(o);
  ASSERT_TRUE(client.ok());
  const absl::Status joined = (*client)->Join("a:1", absl::Now() + absl::Seconds(10));
  client->reset();
  fake.join();
  EXPECT_TRUE(absl::StrContains(joined.message(), "failed to prove the token")) << joined;
}

// A held KvGet belongs to its connection: when that closes and a new connection gets the same
// descriptor number, the new one must not receive the old one's answers (it used to: pending
// requests were keyed by descriptor, and a client matches answers by request number alone).
TEST_F(CoordinatorTest, HeldKeyRequestsDieWithTheirConnection) {
  StartCoordinator(3);
  {
    UniqueFd gone = RawJoin(coordinator_->address(), "secret");
    KvMessage get{.request = 1, .key = "theirs", .wait_ms = 10000};
    ASSERT_TRUE(WriteControlFrame(gone.get(), FrameType::kKvGet, get.Serialize(),
                                  absl::Now() + absl::Seconds(5))
                    .ok());
    absl::SleepFor(absl::Milliseconds(100));  // The coordinator holds the request.
  }  // Closed: the coordinator drops it and its descriptor number is free again.
  absl::SleepFor(absl::Milliseconds(200));
  auto next = Join(ClientOptions());  // Likely to reuse the number; its first request is 1 too.
  auto writer = Join(ClientOptions());
  ASSERT_TRUE(next.ok() && writer.ok());
  std::thread put([&] {
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_TRUE((*writer)->Put("theirs", "not for you", absl::Now() + absl::Seconds(5)).ok());
  });
  auto mine = (*next)->Get("mine", absl::Now() + absl::Milliseconds(800));
  put.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(mine.status())) << (mine.ok() ? *mine : "");
}

TEST_F(CoordinatorTest, SilentRankIsDeclaredFailedInANewEpoch) {
  StartCoordinator(2, absl::Milliseconds(800));
  auto a = Join(ClientOptions());
  ASSERT_TRUE(a.ok());
  // The second member speaks the protocol by hand and then stays silent: no heartbeats.
  UniqueFd raw = RawJoin(coordinator_->address(), "secret");
  Request changed;  // Completed by the first membership change.
  PeerTable seen;
  (*a)->SetMembershipCallback([&](const PeerTable& t) {
    if (!changed.done()) {
      seen = t;
      changed.Complete(absl::OkStatus());
    }
  });
  ASSERT_TRUE(changed.Wait(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(seen.epoch, 2u);
  EXPECT_FALSE(seen.peers[1].alive);
  EXPECT_TRUE(absl::StrContains(seen.peers[1].failure, "no heartbeat")) << seen.peers[1].failure;
}

// Input that is not the protocol: each connection is refused with a reason while the service
// keeps serving the others.
TEST_F(CoordinatorTest, GarbageTruncationAndOversizedLengthsAreRejected) {
  StartCoordinator(1);
  // Random bytes.
  UniqueFd garbage = Dial(coordinator_->address());
  SendBytes(garbage.get(), std::vector<uint8_t>(100, 0x5a));
  EXPECT_TRUE(absl::StrContains(ReadUntilClosed(garbage.get()), "not an hmc frame"));
  // A frame header that claims a huge payload.
  UniqueFd oversized = Dial(coordinator_->address());
  SendBytes(oversized.get(), testing_util::OversizedHeader(FrameType::kJoin));
  EXPECT_TRUE(absl::StrContains(ReadUntilClosed(oversized.get()), "exceeds the limit"));
  // A frame cut short, then the connection closed.
  {
    UniqueFd truncated = Dial(coordinator_->address());
    std::vector<uint8_t> frame = EncodeControlFrame(FrameType::kJoin, std::vector<uint8_t>(64, 1));
    frame.resize(frame.size() - 10);
    SendBytes(truncated.get(), frame);
    shutdown(truncated.get(), SHUT_WR);
    ReadUntilClosed(truncated.get());
  }
  // A connection that never says anything is dropped at the handshake deadline.
  UniqueFd silent = Dial(coordinator_->address());
  ReadUntilClosed(silent.get());
  // A peer speaking another protocol version is told both versions.
  UniqueFd future = Dial(coordinator_->address());
  std::vector<uint8_t> frame = EncodeControlFrame(FrameType::kJoin, std::vector<uint8_t>(8, 0));
  frame[4] = 9;
  SendBytes(future.get(), frame);
  const std::string answer = ReadUntilClosed(future.get());
  EXPECT_TRUE(absl::StrContains(
      answer, absl::StrFormat("peer speaks version 9, this build speaks %d", kProtocolVersion)))
      << answer;
  // The service still works.
  auto member = Join(ClientOptions());
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_TRUE((*member)->WaitForPeers(absl::Now() + absl::Seconds(5)).ok());
  EXPECT_EQ(testing_util::MissingRejections(
                [&] { return coordinator_->rejections(); },
                {"not an hmc frame", "exceeds the limit", "closed inside a frame",
                 "handshake timed out", "version 9", "127.0.0.1:"}),
            "");
}

// An empty token used to turn authentication off silently; now it takes an explicit --insecure,
// and a proof OpenSSL failed to compute (empty) matches nothing, not even another empty one.
TEST(CoordinatorAuth, AnEmptyTokenIsRefusedUnlessInsecureIsSaid) {
  CoordinatorConfig config;
  config.world_size = 1;
  auto refused = Coordinator::Start(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "no shared token")) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--insecure")) << refused.status();
  config.insecure = true;
  auto insecure = Coordinator::Start(config);
  ASSERT_TRUE(insecure.ok()) << insecure.status();
  CoreOptions o;
  o.coordinator = (*insecure)->address().ToString();
  auto client = CoordinatorClient::Connect(o);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::StrContains(client.status().message(), "rank: no shared token"))
      << client.status();
  o.insecure = true;
  client = CoordinatorClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Join("a:1", absl::Now() + absl::Seconds(10)).ok());
  EXPECT_FALSE(ProofsEqual("", ""));
  EXPECT_TRUE(ProofsEqual("x", "x"));
}

// 1000 connections that never prove the token (silent, or stopping inside a frame header) while
// a group forms: the coordinator holds at most 256 of them, dropping the oldest for each new one,
// logs a bounded number of lines, and the group forms.
TEST_F(CoordinatorTest, AFloodOfUnprovenConnectionsIsCappedAndTheGroupStillForms) {
  RaiseDescriptorLimit();
  StartCoordinator(4);
  const int before = testing_util::OpenDescriptors();
  std::vector<UniqueFd> flood;
  auto dial = [&](int i) {
    flood.push_back(testing_util::Dial(coordinator_->address()));
    if (i % 4 == 0) SendBytes(flood.back().get(), std::vector<uint8_t>(20, 0x48));
  };
  constexpr int kFlood = 1000;
  for (int i = 0; i < kFlood - 100; ++i) dial(i);
  std::thread trickle([&] {  // The rest while the ranks join.
    for (int i = kFlood - 100; i < kFlood; ++i) {
      dial(i);
      absl::SleepFor(absl::Milliseconds(2));
    }
  });
  std::vector<std::unique_ptr<CoordinatorClient>> ranks;
  for (int r = 0; r < 4; ++r) {
    auto joined = Join(ClientOptions(r), absl::StrCat("m:", r));
    ASSERT_TRUE(joined.ok()) << joined.status();
    ranks.push_back(std::move(*joined));
  }
  trickle.join();
  absl::StatusOr<PeerTable> table = ranks[0]->WaitForPeers(absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->epoch, 1u);
  // This process holds the flood's 1000 client ends, two ends per rank, and the coordinator's
  // ends of the connections it kept: at most 256 unproven ones.
  const int held = testing_util::OpenDescriptors() - before;
  EXPECT_LE(held, kFlood + 8 + 256 + 8) << held;
  bool capped = false;
  for (const std::string& r : coordinator_->rejections()) {
    capped = capped || absl::StrContains(r, "more than 256 connections have not proven the token");
  }
  EXPECT_TRUE(capped);
}

}  // namespace
}  // namespace hmc
