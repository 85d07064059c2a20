// The multi-stream TCP transport over real sockets on loopback (IPv4 and IPv6), driven from
// several threads; also runs under TSan.
#include "transports/tcp/tcp_transport.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <numeric>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/auth.h"
#include "core/coordinator_protocol.h"
#include "tests/testing/hostile_peer.h"
#include "tests/testing/raw_socket.h"
#include "tests/testing/tcp_mesh.h"
#include "transports/tcp/cma.h"
#include "transports/tcp/handshake.h"
#include "transports/tcp/stream_adapter.h"

namespace hmc {
namespace {

using testing_util::Config;
using testing_util::Connect;
using testing_util::ExchangeBothWays;
using testing_util::kToken;
using testing_util::Mesh;
using testing_util::Pattern;

// A receiver that refuses pulls answers the rendezvous with a refusal; the sender then streams
// the message, and keeps streaming to that peer.
TEST(TcpTransport, RefusedPullFallsBackToStreaming) {
  Mesh mesh = Connect(2, 2, /*local=*/true, "127.0.0.1:0", [](int r, TcpTransportConfig& c) {
    c.limits.pull_min_bytes = r == 0 ? 4096 : 0;  // Rank 1 refuses to pull.
  });
  auto& channels = mesh.channels;
  for (int round = 0; round < 2; ++round) {
    std::vector<uint8_t> data = Pattern(1 << 20, static_cast<uint8_t>(round)), got(1 << 20);
    auto recv = channels[1][0]->Recv(round, got.data(), got.size());
    auto send = channels[0][1]->Send(round, data.data(), data.size());
    ASSERT_TRUE(send->Wait(absl::Now() + absl::Seconds(10)).ok());
    ASSERT_TRUE(recv->Wait(absl::Now() + absl::Seconds(10)).ok());
    EXPECT_EQ(got, data);
  }
  EXPECT_EQ(channels[1][0]->stats().bytes_received, 2u << 20);
}

// A local message from pull_min_bytes on is pulled: its send completes only once the receiver
// has read it, so not before a receive is posted. One sent eagerly (the argument check's) travels
// in the socket: its send completes on its own, and the receive finds it later.
TEST(TcpTransport, AnEagerSendTravelsInTheSocketWhereASendIsPulled) {
  Mesh mesh = Connect(2, 1, /*local=*/true, "127.0.0.1:0",
                      [](int, TcpTransportConfig& c) { c.limits.pull_min_bytes = 4096; });
  auto& channels = mesh.channels;
  const std::vector<uint8_t> pulled = Pattern(64 << 10, 1), eager = Pattern(64 << 10, 2);
  auto pull_send = channels[0][1]->Send(1, pulled.data(), pulled.size());
  auto eager_send = channels[0][1]->SendEager(2, eager.data(), eager.size());
  ASSERT_TRUE(eager_send->Wait(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_FALSE(pull_send->done());
  std::vector<uint8_t> got_pulled(pulled.size()), got_eager(eager.size());
  auto recv_eager = channels[1][0]->Recv(2, got_eager.data(), got_eager.size());
  auto recv_pulled = channels[1][0]->Recv(1, got_pulled.data(), got_pulled.size());
  ASSERT_TRUE(recv_eager->Wait(absl::Now() + absl::Seconds(10)).ok());
  ASSERT_TRUE(recv_pulled->Wait(absl::Now() + absl::Seconds(10)).ok());
  ASSERT_TRUE(pull_send->Wait(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(got_pulled, pulled);
  EXPECT_EQ(got_eager, eager);
}

// Pulls read only what the process at the other end of the socket (SO_PEERCRED) registered for
// that message; anything else in an offer is forged (DataLoss), and a process this one may not
// read makes the sender stream instead (FailedPrecondition).
TEST(CrossMemoryAttach, PullsOnlyWhatThePeerProcessRegisteredForTheMessage) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  UniqueFd a(pair[0]), b(pair[1]);
  absl::StatusOr<PeerProcess> peer = PeerProcessOf(a.get());
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->pid, getpid());
  std::vector<uint8_t> data = Pattern(300000, 5), got(300000);
  std::unique_ptr<PullRegistration> registration = RegisterPull(7, data.data(), data.size());
  const PullOffer offer = OfferOf(*registration);
  ASSERT_TRUE(PullOffered(*peer, 7, offer, got.data()).ok());
  EXPECT_EQ(got, data);
  auto forged = [&](uint64_t tag, PullOffer o) { return PullOffered(*peer, tag, o, got.data()); };
  EXPECT_TRUE(absl::IsDataLoss(forged(8, offer)));  // Another message's.
  PullOffer elsewhere = offer;
  elsewhere.address += 4096;
  EXPECT_TRUE(absl::IsDataLoss(forged(7, elsewhere)));
  PullOffer longer = offer;
  longer.bytes += 1;
  EXPECT_TRUE(absl::IsDataLoss(forged(7, longer)));
  PullOffer impostor = offer;  // Another process at a reused pid holds another identity.
  impostor.identity[0] ^= 1;
  EXPECT_TRUE(absl::IsDataLoss(forged(7, impostor)));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      PullOffered(PeerProcess{peer->pid, peer->uid + 1}, 7, offer, got.data())));
  EXPECT_TRUE(
      absl::IsFailedPrecondition(PullOffered(PeerProcess{0, peer->uid}, 7, offer, got.data())));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      PullOffered(PeerProcess{0x7ffffff0, peer->uid}, 7, offer, got.data())));
}

// Messages that arrive before their receives are buffered only up to max_unexpected_bytes (as the
// transport's own accounting shows); past that the transport stops reading the stream (TCP pushes
// back on the sender) and resumes once receives are posted. Everything still arrives intact.
TEST(TcpTransport, UnexpectedMessagesStayWithinTheirMemoryBound) {
  constexpr uint64_t kBudget = 64 << 10;
  Mesh mesh = Connect(2, 2, /*local=*/false, "127.0.0.1:0",
                      [](int, TcpTransportConfig& c) { c.max_unexpected_bytes = kBudget; });
  auto& channels = mesh.channels;
  // Eight 24 KiB messages (two fit the budget), then 24 MiB (no message fits it).
  std::vector<size_t> sizes(8, 24 << 10);
  sizes.resize(8 + 24, 1 << 20);
  const int count = static_cast<int>(sizes.size());
  std::vector<std::vector<uint8_t>> sent, got;
  std::vector<RequestPtr> sends;
  for (int m = 0; m < count; ++m) {
    sent.push_back(Pattern(sizes[m], static_cast<uint8_t>(m)));
    sends.push_back(channels[0][1]->Send(m, sent.back().data(), sent.back().size()));
  }
  // Until an arrival found the budget full (bounded), so that the pause path runs.
  const TcpTransport& receiver = *mesh.transports[1];
  for (int i = 0; i < 1000 && receiver.unexpected_memory().waits == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GT(receiver.unexpected_memory().waits, 0u);
  // Post in reverse: the last message's receive first, so paused streams must resume out of order.
  std::vector<RequestPtr> receives(count);
  for (int m = 0; m < count; ++m) got.emplace_back(sizes[m]);
  for (int m = count - 1; m >= 0; --m) {
    receives[m] = channels[1][0]->Recv(m, got[m].data(), got[m].size());
  }
  for (int m = 0; m < count; ++m) {
    ASSERT_TRUE(receives[m]->Wait(absl::Now() + absl::Seconds(30)).ok()) << m;
    ASSERT_TRUE(sends[m]->Wait(absl::Now() + absl::Seconds(30)).ok()) << m;
    EXPECT_EQ(got[m], sent[m]) << m;
  }
  // Buffered what fit, never more than the budget.
  EXPECT_GE(receiver.unexpected_memory().peak_bytes, 24u << 10);
  EXPECT_LE(receiver.unexpected_memory().peak_bytes, kBudget);
}

// A receiver that posts its receive long after a message beyond its unexpected-message budget
// arrived leaves the stream unread, its TCP window shut, for three liveness timeouts: a slower
// peer still computing, not a vanished one. Linux fails a connection whose receiver's zero window
// lasts TCP_USER_TIMEOUT ("Connection timed out"), so the receiver tells the sender it holds the
// stream, and the sender stops that timeout until the stream is released.
TEST(TcpTransport, AReceiverThatPostsLateIsNotTakenForAVanishedOne) {
  Mesh mesh = Connect(2, 2, /*local=*/false, "127.0.0.1:0", [](int, TcpTransportConfig& c) {
    c.limits.liveness_timeout = absl::Seconds(1);
    c.max_unexpected_bytes = 64 << 10;
  });
  constexpr size_t kBytes = 64 << 20;  // Far more than both sockets' buffers hold.
  const std::vector<uint8_t> data = Pattern(kBytes, 5);
  const RequestPtr sent = mesh.channels[0][1]->Send(7, data.data(), data.size());
  absl::SleepFor(absl::Seconds(3));
  ASSERT_TRUE(mesh.channels[0][1]->status().ok()) << mesh.channels[0][1]->status();
  std::vector<uint8_t> got(kBytes);
  const RequestPtr received = mesh.channels[1][0]->Recv(7, got.data(), kBytes);
  ASSERT_TRUE(received->Wait(absl::Now() + absl::Seconds(30)).ok());
  ASSERT_TRUE(sent->Wait(absl::Now() + absl::Seconds(30)).ok());
  EXPECT_EQ(got, data);
  // Released: the next message flows as before.
  const RequestPtr again = mesh.channels[0][1]->Send(8, data.data(), 1 << 20);
  ASSERT_TRUE(mesh.channels[1][0]
                  ->Recv(8, got.data(), 1 << 20)
                  ->Wait(absl::Now() + absl::Seconds(30))
                  .ok());
  ASSERT_TRUE(again->Wait(absl::Now() + absl::Seconds(30)).ok());
}

TEST(TcpTransport, WorksOverIpv6) {
  auto probe = SocketAddress::Parse("[::1]:0");
  ASSERT_TRUE(probe.ok());
  if (!ListenTcp(*probe).ok()) GTEST_SKIP() << "no IPv6 loopback here";
  Mesh mesh = Connect(2, 2, /*local=*/false, "[::1]:0");
  EXPECT_TRUE(absl::StartsWith(mesh.transports[0]->tcp_address(), "[::1]:"));
  std::vector<uint8_t> data = Pattern(1 << 20, 9), got(1 << 20);
  auto r = mesh.channels[0][1]->Recv(1, got.data(), got.size());
  ASSERT_TRUE(mesh.channels[1][0]
                  ->Send(1, data.data(), data.size())
                  ->Wait(absl::Now() + absl::Seconds(10))
                  .ok());
  ASSERT_TRUE(r->Wait(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(got, data);
}

// HMC_TCP_CONGESTION: every TCP connection runs the named congestion control; a name the kernel
// lacks fails the transport's creation, naming it.
// What the kernel reports of the established TCP connections with an end at `port` (`ss -tin`,
// two lines per connection); `filter` is "sport" for the ends that listened, "dport" for those
// that connected, or both as "sport = :PORT or dport".
std::string SocketListing(const std::string& filter, const std::string& port) {
  FILE* ss = popen(
      absl::StrCat("ss -tinH state established '( ", filter, " = :", port, " )'").c_str(), "r");
  EXPECT_NE(ss, nullptr);
  if (ss == nullptr) return "";
  std::string listing;
  char line[4096];
  while (fgets(line, sizeof(line), ss) != nullptr) listing += line;
  EXPECT_EQ(pclose(ss), 0) << listing;
  return listing;
}

std::string PortOf(const TcpTransport& transport) {
  const std::string address = transport.tcp_address();
  return address.substr(address.rfind(':') + 1);
}

TEST(TcpTransport, ConnectionsRunTheChosenCongestionControl) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_TRUE(SetCongestionControl(fd.get(), "reno").ok());
  char name[16] = {};
  socklen_t length = sizeof(name);
  ASSERT_EQ(getsockopt(fd.get(), IPPROTO_TCP, TCP_CONGESTION, name, &length), 0);
  EXPECT_STREQ(name, "reno");

  Mesh mesh = Connect(2, 2, /*local=*/false, "127.0.0.1:0",
                      [](int, TcpTransportConfig& c) { c.tcp_congestion = "reno"; });
  ExchangeBothWays(mesh, 1, 1 << 20, 1 << 20, /*up_to=*/false);
  // Both ends of both streams to rank 0's listener, as the kernel reports them: the connecting
  // side set it, the accepted side inherited it from the listener.
  const std::string port = PortOf(*mesh.transports[0]);
  const std::string listing = SocketListing(absl::StrCat("sport = :", port, " or dport"), port);
  int reno = 0, other = 0;
  for (absl::string_view l : absl::StrSplit(listing, '\n')) {
    if (absl::StrContains(l, " rtt:")) ++(absl::StrContains(l, "reno") ? reno : other);
  }
  EXPECT_EQ(reno, 4) << listing;
  EXPECT_EQ(other, 0) << listing;

  TcpTransportConfig config = Config("127.0.0.1:0", 1);
  config.tcp_congestion = "no-such-algorithm";
  auto refused = TcpTransport::Create(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(
      absl::StrContains(refused.status().message(), "TCP congestion control 'no-such-algorithm'"))
      << refused.status();
}

// SetPacingRate reaches the kernel: each of the link's streams paces at its part, until the cap
// is lifted. (`ss` prints a socket's pacing as "pacing_rate NOWbps/MAXbps", the maximum only
// where one is set.)
TEST(TcpTransport, PacingRateIsSharedByTheStreamsAndLifted) {
  Mesh mesh = Connect(2, 2);
  const std::string port = PortOf(*mesh.transports[0]);
  // Rank 0 listened: its ends of the link are the ones whose source port is its listener's.
  auto paced_streams = [&](const std::string& rate) {
    int paced = 0, connections = 0;
    for (absl::string_view l : absl::StrSplit(SocketListing("sport", port), '\n')) {
      if (!absl::StrContains(l, " rtt:")) continue;
      ++connections;
      if (absl::StrContains(l, absl::StrCat("bps/", rate))) ++paced;
    }
    EXPECT_EQ(connections, 2);
    return paced;
  };
  mesh.channels[0][1]->SetPacingRate(4'000'000);  // Bytes/s: 16 Mbit/s per stream.
  ExchangeBothWays(mesh, 1, 1 << 20, 1 << 20, /*up_to=*/false);
  EXPECT_EQ(paced_streams("16000000bps"), 2);
  mesh.channels[0][1]->parallel_streams()->SetActiveStreams(1);
  ExchangeBothWays(mesh, 3, 1 << 20, 1 << 20, /*up_to=*/false);
  EXPECT_EQ(paced_streams("32000000bps"), 1);  // The active stream takes the whole rate.
  mesh.channels[0][1]->parallel_streams()->SetActiveStreams(2);
  mesh.channels[0][1]->SetPacingRate(0);
  ExchangeBothWays(mesh, 5, 1 << 20, 1 << 20, /*up_to=*/false);
  EXPECT_EQ(paced_streams(""), 0);
}

// The receiver's stream adapter asks the sender for another count for the size class it timed,
// and the sender spreads later messages of that class (only) over it. The messages go out together,
// so that each arrives behind another (the adapter times only a link with a backlog); after a
// baseline of two samples over one stream the climb always tries every connection (4), whatever
// the rates.
TEST(TcpTransport, AReceiverThatAdaptsStreamsChangesWhatTheSenderUsesForThatSize) {
  Mesh mesh = Connect(2, 4, /*local=*/false, "127.0.0.1:0",
                      [](int r, TcpTransportConfig& c) { c.limits.adapt_streams = r == 1; });
  Channel& sender = *mesh.channels[0][1];
  ParallelStreams& sender_streams = *sender.parallel_streams();
  sender_streams.SetActiveStreams(1);
  constexpr size_t kBytes = 1 << 20;  // Size class 1 (1-4 MiB).
  // A loaded machine may stall the receiver for longer than a backlog's gap between two messages,
  // so batches go out until the request arrives (at most 20).
  constexpr int kMessages = 2 * ArrivalSampler::kMessagesPerSample + 1;
  const std::vector<uint8_t> data = Pattern(kBytes, 3);
  std::vector<std::vector<uint8_t>> got(kMessages, std::vector<uint8_t>(kBytes));
  for (int batch = 0; batch < 20 && sender_streams.streams_for(kBytes) == 1; ++batch) {
    std::vector<RequestPtr> requests;
    for (int i = 0; i < kMessages; ++i) {
      const uint64_t tag = batch * kMessages + i;
      requests.push_back(mesh.channels[1][0]->Recv(tag, got[i].data(), kBytes));
      requests.push_back(sender.Send(tag, data.data(), data.size()));
    }
    for (const RequestPtr& r : requests) {
      ASSERT_TRUE(r->Wait(absl::Now() + absl::Seconds(10)).ok());
    }
    for (const std::vector<uint8_t>& message : got) ASSERT_EQ(message, data);
    // The request travels back on its own.
    for (int i = 0; i < 100 && sender_streams.streams_for(kBytes) == 1; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  EXPECT_EQ(sender_streams.streams_for(kBytes), 4);
  EXPECT_EQ(sender_streams.streams_for(4 * kBytes), 1);  // Another class: not timed, not changed.
  EXPECT_EQ(sender_streams.streams_for(64 << 10), 1);    // Below the adapted sizes.
  // The rank that does not adapt never asks.
  EXPECT_EQ(mesh.channels[1][0]->parallel_streams()->streams_for(kBytes), 4);
}

// Rank 1 played by the test: `streams` connections to rank 0's listener, each through the
// connector's side of the handshake; the transport sees an ordinary peer.
std::vector<UniqueFd> ConnectAsRankOne(const SocketAddress& address, int streams) {
  std::vector<UniqueFd> fds;
  const testing_util::HostileIdentity rank_one{kToken, "t", 1, 0, streams, 1, FrameIntegrity::kOff};
  for (int stream = 0; stream < streams; ++stream) {
    absl::StatusOr<testing_util::HostileStream> s =
        testing_util::HandshakeAs(address, rank_one, stream);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    fds.push_back(std::move(s->fd));
  }
  return fds;
}

// Reads data frames from `fd` until `bytes` of payload arrived or the deadline passed; returns
// the payload bytes read.
uint64_t ReadPayload(int fd, uint64_t bytes, absl::Time deadline) {
  uint64_t got = 0;
  std::vector<uint8_t> payload;
  while (got < bytes) {
    uint8_t header[kFrameHeaderBytes];
    if (!ReadFully(fd, header, deadline).ok()) break;
    auto h = DecodeFrameHeader(header, uint64_t{1} << 30);
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok()) break;
    payload.resize(h->payload_bytes);
    if (!ReadFully(fd, payload, deadline).ok()) break;
    got += h->payload_bytes;
  }
  return got;
}

TEST(TcpTransport, AStreamThatStallsCarriesLittleOfWhatFollows) {
  // The streams of a link share a message's stripes as they drain, not in fixed parts: with one
  // of two streams stalled (its reader is away), nearly everything goes over the other one. With
  // fixed halves the reader of the live stream would wait for its second half in vain.
  // Unsealed: the test reads the frames by hand.
  TcpTransportConfig config = Config("127.0.0.1:0", 2, kToken, /*local_sockets=*/false);
  config.limits.integrity = FrameIntegrity::kOff;
  // What the stalled stream swallows is its socket buffers: fixed at 1 MiB, not autotuned up to
  // 4 MiB (which, under a sanitizer on a loaded machine, was a quarter of the messages).
  config.socket_buffer_bytes = 1 << 20;
  auto sender = TcpTransport::Create(config);
  ASSERT_TRUE(sender.ok()) << sender.status();
  auto address = SocketAddress::Parse((*sender)->tcp_address());
  ASSERT_TRUE(address.ok());
  const std::vector<PeerAddress> peers = {{0, (*sender)->address(), "rank 0"},
                                          {1, "127.0.0.1:1", "rank 1 (the test)"}};
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> channels;
  std::thread accept_side(
      [&] { channels = (*sender)->ConnectAll(0, peers, absl::Now() + absl::Seconds(10)); });
  std::vector<UniqueFd> streams = ConnectAsRankOne(*address, 2);
  accept_side.join();
  ASSERT_TRUE(channels.ok()) << channels.status();
  ASSERT_EQ(streams.size(), 2u);

  constexpr int kMessages = 16;
  constexpr uint64_t kMessageBytes = 1 << 20;
  const std::vector<uint8_t> data = Pattern(kMessageBytes, 7);
  std::vector<RequestPtr> sends;
  for (int i = 0; i < kMessages; ++i) {
    sends.push_back((*channels)[1]->Send(100 + i, data.data(), kMessageBytes));
  }
  const uint64_t total = kMessages * kMessageBytes;
  const uint64_t live =
      ReadPayload(streams[0].get(), total * 3 / 4, absl::Now() + absl::Seconds(10));
  EXPECT_GE(live, total * 3 / 4) << "the live stream carried only " << live << " of " << total;
  // The stalled stream's reader returns: everything arrives, on either stream, and every send
  // completes.
  uint64_t rest = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (live + rest < total && absl::Now() < deadline) {
    pollfd readable[2] = {{streams[0].get(), POLLIN, 0}, {streams[1].get(), POLLIN, 0}};
    if (poll(readable, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if ((readable[i].revents & POLLIN) != 0) rest += ReadPayload(streams[i].get(), 1, deadline);
    }
  }
  EXPECT_EQ(live + rest, total);
  for (auto& r : sends) EXPECT_TRUE(r->Wait(absl::Now() + absl::Seconds(10)).ok());
}

TEST(TcpTransport, PeerThatDiesFailsReceivesWithItsName) {
  Mesh mesh = Connect(2, 3);
  std::vector<uint8_t> got(10);
  auto recv = mesh.channels[0][1]->Recv(1, got.data(), got.size());
  mesh.channels[1].clear();
  mesh.transports[1].reset();  // Sockets close without a goodbye, as in a crash.
  absl::Status s = recv->Wait(absl::Now() + absl::Seconds(10));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 1")) << s;
}

TEST(TcpTransport, GracefulShutdownDeliversEverythingInFlight) {
  Mesh mesh = Connect(2, 2);
  std::vector<uint8_t> data = Pattern(4 << 20, 3), got(4 << 20);
  auto recv = mesh.channels[1][0]->Recv(5, got.data(), got.size());
  auto send = mesh.channels[0][1]->Send(5, data.data(), data.size());
  absl::Status other_left;
  std::thread other(
      [&] { other_left = mesh.transports[1]->Shutdown(absl::Now() + absl::Seconds(10)); });
  EXPECT_TRUE(mesh.transports[0]->Shutdown(absl::Now() + absl::Seconds(10)).ok());
  other.join();
  EXPECT_TRUE(other_left.ok()) << other_left;
  EXPECT_TRUE(send->Wait(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_TRUE(recv->Wait(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(got, data);
}

// Handshakes that are not from a peer of this world are refused, logged with the address, and
// the transport keeps accepting the real peers.
TEST(TcpTransport, RejectsBadHandshakesAndKeepsServing) {
  auto victim = TcpTransport::Create(Config("127.0.0.1:0", 1));
  ASSERT_TRUE(victim.ok());
  auto address = SocketAddress::Parse((*victim)->tcp_address());
  ASSERT_TRUE(address.ok());
  using testing_util::Dial;
  using testing_util::ReadUntilClosed;
  using testing_util::SendBytes;
  // Random bytes.
  UniqueFd garbage = Dial(*address);
  SendBytes(garbage.get(), std::vector<uint8_t>(200, 0x33));
  EXPECT_TRUE(absl::StrContains(ReadUntilClosed(garbage.get()), "not an hmc frame"));
  // An oversized length.
  UniqueFd oversized = Dial(*address);
  SendBytes(oversized.get(), testing_util::OversizedHeader(FrameType::kPeerHello));
  EXPECT_TRUE(absl::StrContains(ReadUntilClosed(oversized.get()), "exceeds the limit"));
  // A truncated frame.
  {
    UniqueFd truncated = Dial(*address);
    std::vector<uint8_t> frame =
        EncodeControlFrame(FrameType::kPeerHello, std::vector<uint8_t>(40, 2));
    frame.resize(frame.size() - 5);
    SendBytes(truncated.get(), frame);
    shutdown(truncated.get(), SHUT_WR);
    ReadUntilClosed(truncated.get());
  }
  // A peer with the wrong token.
  auto intruder = TcpTransport::Create(Config("127.0.0.1:0", 1, "wrong-token"));
  ASSERT_TRUE(intruder.ok());
  std::vector<PeerAddress> peers = {{0, (*victim)->address(), "rank 0"},
                                    {1, (*intruder)->address(), "rank 1"}};
  auto refused = (*intruder)->ConnectAll(1, peers, absl::Now() + absl::Seconds(3));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "wrong token")) << refused.status();
  // The real peer still connects and talks.
  auto friendly = TcpTransport::Create(Config("127.0.0.1:0", 1));
  ASSERT_TRUE(friendly.ok());
  peers[1].address = (*friendly)->address();
  std::thread accept_side([&] {
    auto channels = (*victim)->ConnectAll(0, peers, absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(channels.ok()) << channels.status();
    uint32_t value = 0;
    ASSERT_TRUE((*channels)[1]->Recv(1, &value, 4)->Wait(absl::Now() + absl::Seconds(10)).ok());
    EXPECT_EQ(value, 0xfeedu);
  });
  auto channels = (*friendly)->ConnectAll(1, peers, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(channels.ok()) << channels.status();
  const uint32_t value = 0xfeed;
  EXPECT_TRUE((*channels)[0]->Send(1, &value, 4)->Wait(absl::Now() + absl::Seconds(10)).ok());
  accept_side.join();
  EXPECT_EQ(testing_util::MissingRejections([&] { return (*victim)->rejections(); },
                                            {"not an hmc frame", "exceeds the limit",
                                             "closed inside a frame", "wrong token", "127.0.0.1:"}),
            "");
}

// A polling waiter spins without giving its core away where every rank on the host may keep a CPU
// busy, counting the launcher's ranks or the local peers, whichever are more, and yields it after
// each empty poll where they are more; a spin length that is set is kept.
TEST(TcpTransport, WaitersYieldTheirCoreOnlyWhereTheHostsRanksOutnumberItsCpus) {
  auto spins_alone = [](const EventLoop::Spin& spin) {
    return spin.time > absl::ZeroDuration() && !spin.yield;
  };
  auto spins_yielding = [](const EventLoop::Spin& spin) {
    return spin.time > absl::ZeroDuration() && spin.yield;
  };
  TcpTransportConfig config;
  EXPECT_TRUE(spins_alone(WaiterSpinFor(config, 0, 1)));
  EXPECT_TRUE(spins_alone(WaiterSpinFor(config, 1, 2)));
  EXPECT_TRUE(spins_alone(WaiterSpinFor(config, 7, 64)));
  EXPECT_TRUE(spins_yielding(WaiterSpinFor(config, 2, 2)));
  config.ranks_on_host = 4;  // hmcrun's local_size: ranks in other namespaces of the host.
  EXPECT_TRUE(spins_yielding(WaiterSpinFor(config, 0, 2)));
  EXPECT_TRUE(spins_alone(WaiterSpinFor(config, 0, 4)));
  config.waiter_spin_us = 7;
  EXPECT_EQ(WaiterSpinFor(config, 0, 2).time, absl::Microseconds(7));
  EXPECT_TRUE(WaiterSpinFor(config, 0, 2).yield);
  config.waiter_spin_us = 0;
  EXPECT_EQ(WaiterSpinFor(config, 0, 64).time, absl::ZeroDuration());
}

}  // namespace
}  // namespace hmc
