// A peer that knows the token but sends forged frames: every case fails the victim's channel to
// it with an error naming it, nothing crashes or allocates what the frame claims, and the victim
// keeps serving its other peers.
#include "tests/testing/hostile_peer.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <span>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "tests/testing/raw_socket.h"
#include "transports/tcp/cma.h"
#include "transports/tcp/stream_adapter.h"
#include "transports/tcp/tcp_transport.h"

namespace hmc {
namespace {

using testing_util::HandshakeAs;
using testing_util::HostileIdentity;
using testing_util::HostileStream;

constexpr char kToken[] = "hostile-token";
constexpr int kStreams = 2;

// Ranks 0 (the victim) and 1 (a friend) run real transports; rank 2 is the test, holding raw
// sockets to rank 0 and rank 1 that passed the handshake.
struct HostileMesh {
  std::vector<std::unique_ptr<TcpTransport>> transports;
  std::vector<std::vector<std::shared_ptr<Channel>>> channels;  // [rank][peer], ranks 0 and 1.
  std::vector<HostileStream> to_victim;                         // One per stream.
  std::vector<HostileStream> to_friend;
  HostileIdentity identity{kToken, "h", 2, 0, kStreams, 1};

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
        HostileIdentity to = identity;
        to.to_rank = r;
        absl::StatusOr<HostileStream> stream = HandshakeAs(*address, to, s);
        EXPECT_TRUE(stream.ok()) << stream.status();
        (r == 0 ? to_victim : to_friend)
            .push_back(stream.ok() ? std::move(*stream) : HostileStream());
      }
    }
    for (auto& t : threads) t.join();
  }

  // Sends a frame with any header the test chooses (it need not be consistent), sealed.
  void SendToVictim(int stream, const FrameHeader& header, std::span<const uint8_t> payload = {}) {
    const std::vector<uint8_t> bytes = to_victim[stream].Frame(header, payload);
    ASSERT_TRUE(
        WriteFully(to_victim[stream].fd.get(), bytes, absl::Now() + absl::Seconds(10)).ok());
  }

  // Writes all of `frame` but its last `held_back` bytes on `stream`, or only those.
  void SendToVictimBut(int stream, std::span<const uint8_t> frame, size_t held_back) {
    ASSERT_TRUE(WriteFully(to_victim[stream].fd.get(), frame.first(frame.size() - held_back),
                           absl::Now() + absl::Seconds(10))
                    .ok());
  }
  void SendToVictimTheLast(int stream, std::span<const uint8_t> frame, size_t held_back) {
    ASSERT_TRUE(WriteFully(to_victim[stream].fd.get(), frame.last(held_back),
                           absl::Now() + absl::Seconds(10))
                    .ok());
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

// A control frame of this epoch carrying `payload`, with its checksum.
FrameHeader ControlHeader(FrameType type, std::span<const uint8_t> payload) {
  FrameHeader h;
  h.type = type;
  h.flags = kFlagPayloadChecksum;
  h.epoch = 1;
  h.total_bytes = h.payload_bytes = payload.size();
  h.payload_crc = Checksum(payload);
  return h;
}

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

absl::Duration ProcessCpuTime() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return absl::DurationFromTimeval(usage.ru_utime) + absl::DurationFromTimeval(usage.ru_stime);
}

// A frame whose seal is late (a slow or lossy path splits it across packets): the victim waits
// for the rest without spinning, then takes the message. The receive loop used to retry the seal
// at once when it would block, a busy loop for as long as the seal was on its way (on a 250 ms
// path, long enough to starve the host).
// Bytes of a frame's 16-byte seal that the late-seal tests send only later.
constexpr size_t kHeldBack = 5;

TEST(HostilePeer, ASealThatArrivesLateIsWaitedForWithoutSpinning) {
  HostileMesh mesh;
  const std::vector<uint8_t> payload(4096, 0x3c);
  const std::vector<uint8_t> frame =
      mesh.to_victim[0].Frame(DataHeader(4, payload.size(), 1, 0, payload.size()), payload);
  ASSERT_EQ(frame.size(), kFrameHeaderBytes + payload.size() + 16);  // A 16-byte MAC.
  std::vector<uint8_t> into(payload.size());
  auto recv = mesh.channels[0][2]->Recv(4, into.data(), into.size());
  ASSERT_NO_FATAL_FAILURE(mesh.SendToVictimBut(0, frame, kHeldBack));
  const absl::Duration cpu_before = ProcessCpuTime();
  absl::SleepFor(absl::Milliseconds(500));
  // Idle threads use next to nothing; one spinning thread would use most of the half second.
  EXPECT_LT(ProcessCpuTime() - cpu_before, absl::Milliseconds(250));
  ASSERT_NO_FATAL_FAILURE(mesh.SendToVictimTheLast(0, frame, kHeldBack));
  ASSERT_TRUE(recv->Wait(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(into, payload);
  mesh.ExpectVictimStillServes();
}

// A call abandoned (DiscardTagsBelow) after a frame's payload arrived but before its seal: the
// seal is still read and checked, the message dropped, and the stream carries the next one. The
// abandon used to free the message while the stream still meant to finish its frame, whose end
// then looked the message up and dereferenced the end of the map (a SIGSEGV on the progress
// thread, seen on four continents when a membership change abandoned a call mid-frame).
TEST(HostilePeer, ACallAbandonedWhileAFramesSealIsOnTheWayDropsTheFrame) {
  HostileMesh mesh;
  const std::vector<uint8_t> dropped(4096, 0x3c);
  const std::vector<uint8_t> frame =
      mesh.to_victim[0].Frame(DataHeader(4, dropped.size(), 1, 0, dropped.size()), dropped);
  std::vector<uint8_t> into(dropped.size());
  auto abandoned = mesh.channels[0][2]->Recv(4, into.data(), into.size());
  ASSERT_NO_FATAL_FAILURE(mesh.SendToVictimBut(0, frame, kHeldBack));
  absl::SleepFor(absl::Milliseconds(200));  // The payload is read; the seal is not there yet.
  mesh.channels[0][2]->DiscardTagsBelow(5, absl::CancelledError("the call was abandoned"));
  const absl::Status outcome = abandoned->Wait(absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(absl::IsCancelled(outcome)) << outcome;
  ASSERT_NO_FATAL_FAILURE(mesh.SendToVictimTheLast(0, frame, kHeldBack));
  const std::vector<uint8_t> next(64, 0x5a);
  mesh.SendToVictim(0, DataHeader(6, next.size(), 1, 0, next.size()), next);
  std::vector<uint8_t> got(next.size());
  const absl::Status received =
      mesh.channels[0][2]->Recv(6, got.data(), got.size())->Wait(absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(received.ok()) << received;
  EXPECT_EQ(got, next);
  mesh.ExpectVictimStillServes();
}

// total_bytes near 2^64 used to wrap StripeOf's arithmetic into an empty stripe that passed the
// checks, and the buffer for it threw std::length_error out of the progress thread.
TEST(HostilePeer, LengthThatWrapsAroundFailsTheChannelNamingThePeer) {
  HostileMesh mesh;
  mesh.SendToVictim(0, DataHeader(5, ~uint64_t{0}, 64, 63, 0));
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
  mesh.SendToVictim(0, DataHeader(6, kClaim, 64, 0, uint64_t{1} << 32));
  absl::SleepFor(absl::Milliseconds(100));  // Let it arrive before the receive is posted.
  const std::string why = mesh.VictimsFailure(6);
  EXPECT_TRUE(absl::StrContains(why, "rank 2")) << why;
  EXPECT_TRUE(absl::StrContains(why, absl::StrFormat("the peer sent %d bytes", kClaim))) << why;
  mesh.ExpectVictimStillServes();
}

TEST(HostilePeer, StripesThatDisagreeOrRepeatFailTheChannel) {
  HostileMesh mesh;
  const std::vector<uint8_t> half(8192, 1);
  mesh.SendToVictim(0, DataHeader(7, 16384, 2, 0, 8192), half);
  mesh.SendToVictim(1, DataHeader(7, 16384, 2, 0, 8192), half);  // Stripe 0 again.
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
    mesh.SendToVictim(0, h, std::vector<uint8_t>(4, 0));
    const std::string why = mesh.VictimsFailure(8, 4);
    EXPECT_TRUE(absl::StrContains(why, "rank 2: frame of epoch 9, expected 1")) << why;
    mesh.ExpectVictimStillServes();
  }
  {
    HostileMesh mesh;
    const std::vector<uint8_t> payload(8, 0);
    mesh.SendToVictim(1, ControlHeader(FrameType::kWelcome, payload), payload);
    const std::string why = mesh.VictimsFailure(8, 4);
    EXPECT_TRUE(absl::StrContains(why, "rank 2: unexpected welcome frame on a data stream")) << why;
    mesh.ExpectVictimStillServes();
  }
}

// A receiver's request for a stream count (StreamAdapter) names a size class and a count the
// sender's connections can meet; anything else fails the link naming the peer.
TEST(HostilePeer, ARequestForStreamsThatCannotBeMetFailsTheChannel) {
  for (const std::vector<uint8_t>& payload :
       {std::vector<uint8_t>{0, kStreams + 1}, std::vector<uint8_t>{kSizeClasses, 1},
        std::vector<uint8_t>{0, 0}, std::vector<uint8_t>{0, 1, 2}}) {
    HostileMesh mesh;
    mesh.SendToVictim(0, ControlHeader(FrameType::kStreamsWanted, payload), payload);
    const std::string why = mesh.VictimsFailure(9, 4);
    EXPECT_TRUE(absl::StrContains(why, "rank 2: a request for streams that cannot be met")) << why;
    mesh.ExpectVictimStillServes();
  }
}

// A receiver's notice that it holds a stream (TcpChannel::TellHold) names one of the link's
// streams and held (1) or released (0); anything else fails the link naming the peer.
TEST(HostilePeer, AHoldOfAStreamTheLinkDoesNotHaveFailsTheChannel) {
  for (const std::vector<uint8_t>& payload :
       {std::vector<uint8_t>{kStreams, 1}, std::vector<uint8_t>{0, 2}, std::vector<uint8_t>{0},
        std::vector<uint8_t>{0, 1, 0}}) {
    HostileMesh mesh;
    mesh.SendToVictim(0, ControlHeader(FrameType::kStreamHold, payload), payload);
    const std::string why = mesh.VictimsFailure(9, 4);
    EXPECT_TRUE(absl::StrContains(why, "rank 2: a hold of a stream that it does not have")) << why;
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
  absl::StatusOr<HostileStream> again = HandshakeAs(*address, mesh.identity, 0);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::StrContains(again.status().message(),
                                "refused: rank 2: duplicate connection for stream 0"))
      << again.status();
  // A stream index past the channel's.
  absl::StatusOr<HostileStream> past = HandshakeAs(*address, mesh.identity, kStreams);
  ASSERT_FALSE(past.ok());
  EXPECT_TRUE(absl::StrContains(past.status().message(), "stream 2 out of range")) << past.status();
  // A rank lower than the acceptor's (the higher rank of a pair connects).
  HostileIdentity lower = mesh.identity;
  lower.rank = 0;
  lower.to_rank = 1;
  auto friend_address = SocketAddress::Parse(mesh.transports[1]->tcp_address());
  ASSERT_TRUE(friend_address.ok());
  absl::StatusOr<HostileStream> backwards = HandshakeAs(*friend_address, lower, 0);
  ASSERT_FALSE(backwards.ok());
  EXPECT_TRUE(absl::StrContains(backwards.status().message(),
                                "rank 0 may not connect to rank 1 (the higher rank connects)"))
      << backwards.status();
  // A hello meant for another rank (the proof binds to_rank, so it cannot be redirected).
  HostileIdentity misdirected = mesh.identity;
  misdirected.to_rank = 0;
  absl::StatusOr<HostileStream> elsewhere = HandshakeAs(*friend_address, misdirected, 0);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_TRUE(
      absl::StrContains(elsewhere.status().message(), "rank 2 dialed rank 0, but this is rank 1"))
      << elsewhere.status();
  mesh.ExpectVictimStillServes();
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
    before = testing_util::OpenDescriptors();
    for (int i = 0; i < kFlood; ++i) {
      flood.push_back(testing_util::Dial(victim));
      if (i % 3 == 0) testing_util::SendBytes(flood.back().get(), std::vector<uint8_t>(30, 7));
    }
  });
  mesh.ExpectVictimStillServes();
  const int held = testing_util::OpenDescriptors() - before;
  EXPECT_LE(held, kFlood + 1024 + 64) << held;
  bool capped = false;
  for (const std::string& r : mesh.transports[0]->rejections()) {
    capped = capped || absl::StrContains(r, "more than 1024 connections have not proven the token");
  }
  EXPECT_TRUE(capped);
}

// Forged offers to pull, from a peer in another process on this host (forked before any thread
// starts; it joins over the victim's local socket). The victim reads only the process the kernel
// says is at the other end, and only what that process registered for the message.
class ForgedOffer : public testing::Test {
 protected:
  static constexpr uint64_t kBytes = 1 << 20;
  static constexpr uint64_t kTag = 9;

  // The child: reads the victim's local socket name from the pipe, joins as rank 1 and sends an
  // offer to pull kTag, registered honestly or not; waits for the victim to close.
  [[noreturn]] static void Child(int from_parent, bool honest, const uint8_t* secret) {
    char name[256] = {};
    const ssize_t n = read(from_parent, name, sizeof(name) - 1);
    if (n <= 0) _exit(2);
    absl::StatusOr<HostileStream> stream = testing_util::HandshakeOn(
        ConnectUnix(name, absl::Now() + absl::Seconds(10)), {kToken, "h", 1, 0, 1, 1}, 0);
    if (!stream.ok()) _exit(3);
    // Registered for another address than the offer names, unless honest.
    static uint8_t elsewhere[16];
    std::unique_ptr<PullRegistration> registration =
        RegisterPull(kTag, honest ? secret : elsewhere, kBytes);
    PullOffer offer = OfferOf(*registration);
    offer.address = reinterpret_cast<uint64_t>(secret);
    const std::vector<uint8_t> payload = offer.Serialize();
    FrameHeader h;
    h.type = FrameType::kRendezvous;
    h.flags = kFlagPayloadChecksum;
    h.tag = kTag;
    h.epoch = 1;
    h.total_bytes = kBytes;
    h.payload_bytes = payload.size();
    h.payload_crc = Checksum(payload);
    if (!WriteFully(stream->fd.get(), stream->Frame(h, payload), absl::Now() + absl::Seconds(10))
             .ok()) {
      _exit(4);
    }
    // Until the victim closes (the socket is non-blocking: ReadFully waits, up to its deadline).
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    uint8_t sink[1];
    while (ReadFully(stream->fd.get(), sink, deadline).ok()) {
    }
    _exit(0);
  }

  // Forks the child, then runs the victim (rank 0) and returns its receive's outcome; `secret`
  // is what this process holds at the address the offer names.
  absl::Status Run(bool honest, std::vector<uint8_t>& into) {
    static std::vector<uint8_t> secret(kBytes);     // Same address in the child.
    std::fill(secret.begin(), secret.end(), 0x11);  // What the child will hold there.
    int pipe_fds[2];
    EXPECT_EQ(pipe(pipe_fds), 0);
    const pid_t child = fork();
    if (child == 0) Child(pipe_fds[0], honest, secret.data());
    close(pipe_fds[0]);
    // Written after the fork: only this process holds it.
    std::fill(secret.begin(), secret.end(), 0x5e);
    TcpTransportConfig config;
    config.token = kToken;
    config.world_id = "h";
    config.limits.streams = 1;
    config.limits.epoch = 1;
    auto victim = TcpTransport::Create(config);
    EXPECT_TRUE(victim.ok());
    const std::string address = (*victim)->address();
    const std::string name = address.substr(address.find(" local:") + 7);
    EXPECT_EQ(write(pipe_fds[1], name.data(), name.size()), static_cast<ssize_t>(name.size()));
    close(pipe_fds[1]);
    auto channels = (*victim)->ConnectAll(0, {{0, address, "rank 0"}, {1, "127.0.0.1:1", "rank 1"}},
                                          absl::Now() + absl::Seconds(20));
    EXPECT_TRUE(channels.ok()) << channels.status();
    absl::Status outcome = absl::UnknownError("not connected");
    if (channels.ok()) {
      outcome = (*channels)[1]
                    ->Recv(kTag, into.data(), into.size())
                    ->Wait(absl::Now() + absl::Seconds(20));
    }
    victim->reset();
    int status = 0;
    EXPECT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    return outcome;
  }
};

TEST_F(ForgedOffer, AnOfferForMemoryItsSenderDidNotRegisterFailsTheChannel) {
  std::vector<uint8_t> into(kBytes, 0);
  const absl::Status outcome = Run(/*honest=*/false, into);
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(absl::StrContains(outcome.message(), "rank 1: its offer to pull tag 0x9")) << outcome;
  EXPECT_TRUE(absl::StrContains(outcome.message(), "does not match what its process")) << outcome;
  EXPECT_EQ(std::count(into.begin(), into.end(), 0), static_cast<long>(kBytes));  // Untouched.
}

// An offer can name only its sender's memory: the victim copies the child's bytes at that
// address (what the child could have sent anyway), never its own or a third process's.
TEST_F(ForgedOffer, APullReadsThePeerProcessThatTheKernelNames) {
  std::vector<uint8_t> into(kBytes, 0);
  const absl::Status outcome = Run(/*honest=*/true, into);
  ASSERT_TRUE(outcome.ok()) << outcome;
  EXPECT_EQ(std::count(into.begin(), into.end(), 0x11), static_cast<long>(kBytes));
}

}  // namespace
}  // namespace hmc
