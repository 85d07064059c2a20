// What protects a TCP link between ranks: TLS 1.3 (keys from the token, or certificates) or a
// seal on every frame. A man in the middle, a forwarding process that the test starts, watches
// the bytes and changes one of a data frame: the receive fails naming the peer, never with a
// silently different result; and under TLS the payload never shows on the wire.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "core/frame_seal.h"
#include "tests/testing/certificates.h"
#include "tests/testing/man_in_the_middle.h"
#include "tests/testing/tcp_mesh.h"
#include "transports/tcp/tcp_transport.h"

namespace hmc {
namespace {

using testing_util::Certificates;
using testing_util::Config;
using testing_util::Connect;
using testing_util::ExchangeBothWays;
using testing_util::kToken;
using testing_util::ManInTheMiddle;
using testing_util::Mesh;
using testing_util::Pattern;

enum class Protection { kMac, kCrc, kTls, kOff };

std::string Name(Protection p) {
  switch (p) {
    case Protection::kMac:
      return "Mac";
    case Protection::kCrc:
      return "Crc";
    case Protection::kTls:
      return "Tls";
    case Protection::kOff:
      return "Off";
  }
  return "?";
}

void Apply(Protection p, TcpTransportConfig& config) {
  config.tls.mode = p == Protection::kTls ? TlsMode::kOn : TlsMode::kOff;
  config.limits.integrity = p == Protection::kCrc   ? FrameIntegrity::kCrc
                            : p == Protection::kOff ? FrameIntegrity::kOff
                                                    : FrameIntegrity::kMac;
}

class ProtectedLinkTest : public testing::TestWithParam<Protection> {};

TEST_P(ProtectedLinkTest, MessagesOfEverySizeArriveIntactOverEveryStream) {
  Mesh mesh = Connect(2, 4, /*local=*/false, "127.0.0.1:0",
                      [](int, TcpTransportConfig& c) { Apply(GetParam(), c); });
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{4097}, size_t{1000003}, size_t{8} << 20}) {
    ExchangeBothWays(mesh, 100 + 2 * bytes, bytes, bytes, /*up_to=*/false);
  }
  // Abandoned messages are read and dropped: the seals' sequence stays in step.
  mesh.channels[1][0]->DiscardTagsBelow(1000, absl::CancelledError("abandoned"));
  const std::vector<uint8_t> dropped = Pattern(1 << 20, 5);
  mesh.channels[0][1]
      ->Send(999, dropped.data(), dropped.size())
      ->Wait(absl::Now() + absl::Seconds(20))
      .IgnoreError();
  ExchangeBothWays(mesh, 2000, 1 << 20, 1 << 20, /*up_to=*/false);
}

INSTANTIATE_TEST_SUITE_P(Protections, ProtectedLinkTest,
                         testing::Values(Protection::kMac, Protection::kCrc, Protection::kTls,
                                         Protection::kOff),
                         [](const auto& info) { return Name(info.param); });

// Rank 0 (the acceptor) and rank 1 (the connector), each with its own settings, connect.
struct Pair {
  std::unique_ptr<TcpTransport> acceptor, connector;  // Outlive the channels below.
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> accepted, connected;

  Pair(const TcpTransportConfig& acceptor_config, const TcpTransportConfig& connector_config,
       absl::Duration wait) {
    auto a = TcpTransport::Create(acceptor_config);
    auto c = TcpTransport::Create(connector_config);
    EXPECT_TRUE(a.ok() && c.ok());
    if (!a.ok() || !c.ok()) return;
    acceptor = std::move(*a);
    connector = std::move(*c);
    const std::vector<PeerAddress> peers = {{0, acceptor->address(), "rank 0"},
                                            {1, connector->address(), "rank 1"}};
    std::thread accept([&] { accepted = acceptor->ConnectAll(0, peers, absl::Now() + wait); });
    connected = connector->ConnectAll(1, peers, absl::Now() + wait);
    accept.join();
  }
};

TEST(LinkProtection, MismatchedSettingsAreRefusedNamingBoth) {
  TcpTransportConfig mac = Config("127.0.0.1:0", 1, kToken, /*local_sockets=*/false);
  Apply(Protection::kMac, mac);
  TcpTransportConfig crc = mac;
  Apply(Protection::kCrc, crc);
  Pair pair(mac, crc, absl::Seconds(3));
  ASSERT_FALSE(pair.connected.ok());
  EXPECT_TRUE(absl::StrContains(pair.connected.status().message(), "integrity"))
      << pair.connected.status();
}

TEST(LinkProtection, ALinkThatMustRunTlsRefusesAPeerThatOffersNone) {
  TcpTransportConfig tls = Config("127.0.0.1:0", 1, kToken, /*local_sockets=*/false);
  tls.tls.mode = TlsMode::kOn;
  TcpTransportConfig plain = tls;
  plain.tls.mode = TlsMode::kOff;
  Pair pair(tls, plain, absl::Seconds(3));
  ASSERT_FALSE(pair.connected.ok());
  EXPECT_TRUE(absl::StrContains(pair.connected.status().message(), "requires TLS"))
      << pair.connected.status();
}

TEST(LinkProtection, CertificatesFromTheTrustedAuthorityConnectAndOthersAreRefused) {
  Certificates certificates;
  {
    Mesh mesh = Connect(2, 2, /*local=*/false, "127.0.0.1:0", [&](int r, TcpTransportConfig& c) {
      c.tls = certificates.For(absl::StrFormat("rank%d", r));
    });
    ExchangeBothWays(mesh, 10, 1 << 20, 1 << 20, /*up_to=*/false);
  }
  // A peer whose certificate another authority signed: its TLS handshake fails, and the channel
  // says so naming the peer and the certificate's fault.
  auto acceptor_config = Config("127.0.0.1:0", 1, kToken, /*local_sockets=*/false);
  acceptor_config.tls = certificates.For("rank0");
  auto connector_config = acceptor_config;
  connector_config.tls = certificates.For("stranger");
  Pair pair(acceptor_config, connector_config, absl::Seconds(5));
  // The hmc handshake passed (the token is right), so both sides have channels; TLS then fails.
  ASSERT_TRUE(pair.accepted.ok()) << pair.accepted.status();
  std::vector<uint8_t> into(16);
  absl::Status s =
      (*pair.accepted)[1]->Recv(1, into.data(), into.size())->Wait(absl::Now() + absl::Seconds(10));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 1")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "TLS handshake failed")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "certificate")) << s;
  // A peer with keys from the token facing one with a certificate: it refuses the handshake that
  // did not use its key, since nothing on its side could verify that certificate.
  TcpTransportConfig keys_only = acceptor_config;
  keys_only.tls = TlsConfig{.mode = TlsMode::kOn};
  Pair mixed(acceptor_config, keys_only, absl::Seconds(5));
  ASSERT_TRUE(mixed.connected.ok()) << mixed.connected.status();
  s = (*mixed.connected)[0]
          ->Recv(1, into.data(), into.size())
          ->Wait(absl::Now() + absl::Seconds(10));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 0")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "did not use the key")) << s;
}

TEST(LinkProtection, IncompleteCertificateSettingsAreRefused) {
  TcpTransportConfig config = Config("127.0.0.1:0", 1);
  config.tls.cert_file = "/nonexistent.pem";
  auto t = TcpTransport::Create(config);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), "all three")) << t.status();
}

class ManInTheMiddleTest : public testing::TestWithParam<Protection> {};

TEST_P(ManInTheMiddleTest, AFlippedByteFailsTheReceiveNamingThePeerUnlessNothingProtects) {
  // Rank 1 sends rank 0 one 1 MiB message on one stream through the forwarder, which changes a
  // byte 256 KiB in: inside the payload, long after both handshakes.
  constexpr size_t kBytes = 1 << 20;
  std::vector<uint8_t> message = Pattern(kBytes, 7);
  const uint8_t* marker = message.data() + 4096;  // 64 bytes of the payload in plain text.
  ManInTheMiddle middle(256 << 10, marker, 64);
  std::vector<std::unique_ptr<TcpTransport>> transports;
  for (int r = 0; r < 2; ++r) {
    TcpTransportConfig config = Config("127.0.0.1:0", 1, kToken, /*local_sockets=*/false);
    Apply(GetParam(), config);
    auto t = TcpTransport::Create(config);
    ASSERT_TRUE(t.ok()) << t.status();
    transports.push_back(std::move(*t));
  }
  auto acceptor_address = SocketAddress::Parse(transports[0]->tcp_address());
  ASSERT_TRUE(acceptor_address.ok());
  middle.ForwardTo(acceptor_address->port());
  // Rank 1's table sends it to the forwarder; rank 0 never dials (the higher rank connects).
  const std::vector<PeerAddress> seen_by_0 = {{0, transports[0]->address(), "rank 0"},
                                              {1, "127.0.0.1:1", "rank 1"}};
  const std::vector<PeerAddress> seen_by_1 = {{0, middle.address(), "rank 0"},
                                              {1, transports[1]->address(), "rank 1"}};
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> channels0;
  std::thread accept([&] {
    channels0 = transports[0]->ConnectAll(0, seen_by_0, absl::Now() + absl::Seconds(10));
  });
  auto channels1 = transports[1]->ConnectAll(1, seen_by_1, absl::Now() + absl::Seconds(10));
  accept.join();
  ASSERT_TRUE(channels0.ok()) << channels0.status();
  ASSERT_TRUE(channels1.ok()) << channels1.status();
  std::vector<uint8_t> into(kBytes);
  auto recv = (*channels0)[1]->Recv(3, into.data(), into.size());
  (*channels1)[0]
      ->Send(3, message.data(), message.size())
      ->Wait(absl::Now() + absl::Seconds(20))
      .IgnoreError();
  const absl::Status got = recv->Wait(absl::Now() + absl::Seconds(20));
  if (GetParam() == Protection::kOff) {
    // Nothing protects the frames: the change arrives unnoticed. (This is why mac is the default.)
    ASSERT_TRUE(got.ok()) << got;
    size_t differ = 0;
    for (size_t i = 0; i < kBytes; ++i) differ += into[i] != message[i];
    EXPECT_EQ(differ, 1u);
  } else {
    ASSERT_FALSE(got.ok());
    EXPECT_TRUE(absl::StrContains(got.message(), "rank 1")) << got;
    const std::string expected =
        GetParam() == Protection::kTls ? "TLS receive failed" : "failed its integrity check";
    EXPECT_TRUE(absl::StrContains(got.message(), expected)) << got;
  }
  channels0->clear();
  channels1->clear();
  transports.clear();  // Closes the connections: the forwarder ends.
  EXPECT_EQ(middle.SawMarker(), GetParam() != Protection::kTls)
      << "the payload in plain text on the wire";
}

INSTANTIATE_TEST_SUITE_P(Protections, ManInTheMiddleTest,
                         testing::Values(Protection::kMac, Protection::kCrc, Protection::kTls,
                                         Protection::kOff),
                         [](const auto& info) { return Name(info.param); });

}  // namespace
}  // namespace hmc
