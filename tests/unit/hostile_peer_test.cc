// A peer that knows the token but sends forged frames: every case fails the victim's channel to
// it with an error naming it, nothing crashes or allocates what the frame claims, and the victim
// keeps serving its other peers.
#include "tests/testing/hostile_peer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "tests/testing/raw_socket.h"
#include "transports/tcp/tcp_transport.h"

namespace hmc {
namespace {

using testing_util::ForgedFrame;
using testing_util::HandshakeAs;
using testing_util::HostileIdentity;

constexpr char kToken[] = "hostile-token";
constexpr int kStreams = 2;

// Ranks 0 (the victim) and 1 (a friend) run real transports; rank 2 is the test, holding raw
// sockets to rank 0 and rank 1 that passed the handshake.
struct HostileMesh {
  std::vector<std::unique_ptr<TcpTransport>> transports;
  std::vector<std::vector<std::shared_ptr<Channel>>> channels;  // [rank][peer], ranks 0 and 1.
  std::vector<UniqueFd> to_victim;                              // One per stream.
  std::vector<UniqueFd> to_friend;
  HostileIdentity identity{kToken, "h", 2, kStreams, 1};

  // `before` runs once the victim listens, before the group connects.
  explicit HostileMesh(const std::function<void(const SocketAddress&)>& before = nullptr) {
    std::vector<PeerAddress> peers;
    for (int r = 0; r < 2; ++r) {
      TcpTransportConfig config;
      config.bind = "127.0.0.1:0";
      config.token = kToken;
      config.world_id = "h";
      config.local_sockets = false;
      config.limits.streams = kStreams;
      config.limits.epoch = 1;
      auto t = TcpTransport::Create(config);
      EXPECT_TRUE(t.ok()) << t.status();
      peers.push_back(PeerAddress{r, (*t)->address(), absl::StrFormat("rank %d", r)});
      transports.push_back(std::move(*t));
    }
    peers.push_back(PeerAddress{2, "127.0.0.1:1", "rank 2"});  // Never dialed: it connects.
    if (before) {
      auto victim = SocketAddress::Parse(transports[0]->tcp_address());
      EXPECT_TRUE(victim.ok());
      before(*victim);
    }
    channels.resize(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        auto c = transports[r]->ConnectAll(r, peers, absl::Now() + absl::Seconds(20));
        ASSERT_TRUE(c.ok()) << c.status();
        channels[r] = *c;
      });
    }
    for (int r = 0; r < 2; ++r) {
      auto address = SocketAddress::Parse(transports[r]->tcp_address());
      EXPECT_TRUE(address.ok());
      for (int s = 0; s < kStreams; ++s) {
        absl::StatusOr<UniqueFd> fd = HandshakeAs(*address, identity, s);
        EXPECT_TRUE(fd.ok()) << fd.status();
        (r == 0 ? to_victim : to_friend).push_back(fd.ok() ? std::move(*fd) : UniqueFd());
      }
    }
    for (auto& t : threads) t.join();
  }

  void SendToVictim(int stream, const std::vector<uint8_t>& bytes) {
    ASSERT_TRUE(WriteFully(to_victim[stream].get(), bytes, absl::Now() + absl::Seconds(10)).ok());
  }

  // The victim's receive from rank 2 fails; returns why.
  std::string VictimsFailure(uint64_t tag, size_t bytes = 16) {
    std::vector<uint8_t> into(bytes);
    absl::Status s =
        channels[0][2]->Recv(tag, into.data(), into.size())->Wait(absl::Now() + absl::Seconds(20));
    EXPECT_FALSE(s.ok());
    return std::string(s.message());
  }

  // Ranks 0 and 1 still exchange messages both ways.
  void ExpectVictimStillServes() {
    uint64_t sent = 0x5eed, got = 0;
    auto recv = channels[0][1]->Recv(77, &got, sizeof(got));
    EXPECT_TRUE(
        channels[1][0]->Send(77, &sent, sizeof(sent))->Wait(absl::Now() + absl::Seconds(10)).ok());
    EXPECT_TRUE(recv->Wait(absl::Now() + absl::Seconds(10)).ok());
    EXPECT_EQ(got, sent);
  }
};

FrameHeader DataHeader(uint64_t tag, uint64_t total, uint16_t stripes, uint16_t stripe,
                       uint64_t payload) {
  FrameHeader h;
  h.type = FrameType::kData;
  h.tag = tag;
  h.epoch = 1;
  h.total_bytes = total;
  h.stripes = stripes;
  h.stripe = stripe;
  h.payload_bytes = payload;
  return h;
}

// total_bytes near 2^64 used to wrap StripeOf's arithmetic into an empty stripe that passed the
// checks, and the buffer for it threw std::length_error out of the progress thread.
TEST(HostilePeer, LengthThatWrapsAroundFailsTheChannelNamingThePeer) {
  HostileMesh mesh;
  mesh.SendToVictim(0, ForgedFrame(DataHeader(5, ~uint64_t{0}, 64, 63, 0)));
  const std::string why = mesh.VictimsFailure(5);
  EXPECT_TRUE(absl::StrContains(why, "rank 2")) << why;
  EXPECT_TRUE(absl::StrContains(why, "exceeds the limit of 64 stripes")) << why;
  mesh.ExpectVictimStillServes();
}

// 64 stripes of 4 GiB each (every frame within max_frame_bytes) claim 256 GiB. Nothing is
// allocated for a message larger than the unexpected-message budget: it waits for its receive,
// whose size refuses it.
TEST(HostilePeer, HugeClaimIsNeverAllocatedAndTheReceiveRefusesIt) {
  HostileMesh mesh;
  constexpr uint64_t kClaim = uint64_t{64} << 32;
  mesh.SendToVictim(0, ForgedFrame(DataHeader(6, kClaim, 64, 0, uint64_t{1} << 32)));
  absl::SleepFor(absl::Milliseconds(100));  // Let it arrive before the receive is posted.
  const std::string why = mesh.VictimsFailure(6);
  EXPECT_TRUE(absl::StrContains(why, "rank 2")) << why;
  EXPECT_TRUE(absl::StrContains(why, absl::StrFormat("the peer sent %d bytes", kClaim))) << why;
  mesh.ExpectVictimStillServes();
}

TEST(HostilePeer, StripesThatDisagreeOrRepeatFailTheChannel) {
  HostileMesh mesh;
  const std::vector<uint8_t> half(8192, 1);
  mesh.SendToVictim(0, ForgedFrame(DataHeader(7, 16384, 2, 0, 8192), half));
  mesh.SendToVictim(1, ForgedFrame(DataHeader(7, 16384, 2, 0, 8192), half));  // Stripe 0 again.
  const std::string why = mesh.VictimsFailure(7, 16384);
  EXPECT_TRUE(absl::StrContains(why, "rank 2")) << why;
  EXPECT_TRUE(absl::StrContains(why, "repeated stripe 0 of 2")) << why;
  mesh.ExpectVictimStillServes();
}

TEST(HostilePeer, FrameOfAnotherEpochOrTypeFailsTheChannel) {
  {
    HostileMesh mesh;
    FrameHeader h = DataHeader(8, 4, 1, 0, 4);
    h.epoch = 9;
    mesh.SendToVictim(0, ForgedFrame(h, std::vector<uint8_t>(4, 0)));
    const std::string why = mesh.VictimsFailure(8, 4);
    EXPECT_TRUE(absl::StrContains(why, "rank 2: frame of epoch 9, expected 1")) << why;
    mesh.ExpectVictimStillServes();
  }
  {
    HostileMesh mesh;
    mesh.SendToVictim(1, EncodeControlFrame(FrameType::kWelcome, std::vector<uint8_t>(8, 0), 1));
    const std::string why = mesh.VictimsFailure(8, 4);
    EXPECT_TRUE(absl::StrContains(why, "rank 2: unexpected welcome frame on a data stream")) << why;
    mesh.ExpectVictimStillServes();
  }
}

// Whatever would refuse a stream is checked before PeerAccept: a connector told it was accepted
// is attached, and one that is not gets the reason instead of a false success.
TEST(HostilePeer, RefusedStreamsAreNeverAccepted) {
  HostileMesh mesh;
  auto address = SocketAddress::Parse(mesh.transports[0]->tcp_address());
  ASSERT_TRUE(address.ok());
  // A stream the channel already has.
  absl::StatusOr<UniqueFd> again = HandshakeAs(*address, mesh.identity, 0);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::StrContains(again.status().message(),
                                "refused with error: rank 2: duplicate connection for stream 0"))
      << again.status();
  // A stream index past the channel's.
  absl::StatusOr<UniqueFd> past = HandshakeAs(*address, mesh.identity, kStreams);
  ASSERT_FALSE(past.ok());
  EXPECT_TRUE(absl::StrContains(past.status().message(), "stream 2 out of range")) << past.status();
  // A rank lower than the acceptor's (the higher rank of a pair connects).
  HostileIdentity lower = mesh.identity;
  lower.rank = 0;
  auto friend_address = SocketAddress::Parse(mesh.transports[1]->tcp_address());
  ASSERT_TRUE(friend_address.ok());
  absl::StatusOr<UniqueFd> backwards = HandshakeAs(*friend_address, lower, 0);
  ASSERT_FALSE(backwards.ok());
  EXPECT_TRUE(absl::StrContains(backwards.status().message(),
                                "rank 0 may not connect to rank 1 (the higher rank connects)"))
      << backwards.status();
  mesh.ExpectVictimStillServes();
}

int OpenDescriptors() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

// 1500 connections that never prove the token reach a rank's listener before its group
// connects: the rank keeps at most 1024 of them (the oldest go first), the group's own streams
// still get through, and the rank serves.
TEST(HostilePeer, AFloodOfUnprovenConnectionsIsCappedAndTheGroupStillConnects) {
  RaiseDescriptorLimit();
  std::vector<UniqueFd> flood;
  int before = 0;
  constexpr int kFlood = 1500;
  HostileMesh mesh([&](const SocketAddress& victim) {
    before = OpenDescriptors();
    for (int i = 0; i < kFlood; ++i) {
      flood.push_back(testing_util::Dial(victim));
      if (i % 3 == 0) testing_util::SendBytes(flood.back().get(), std::vector<uint8_t>(30, 7));
    }
  });
  mesh.ExpectVictimStillServes();
  const int held = OpenDescriptors() - before;
  EXPECT_LE(held, kFlood + 1024 + 64) << held;
  bool capped = false;
  for (const std::string& r : mesh.transports[0]->rejections()) {
    capped = capped || absl::StrContains(r, "more than 1024 connections have not proven the token");
  }
  EXPECT_TRUE(capped);
}

}  // namespace
}  // namespace hmc
