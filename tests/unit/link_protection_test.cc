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
#include "tests/testing/command.h"
#include "tests/testing/tcp_mesh.h"
#include "transports/tcp/tcp_transport.h"

namespace hmc {
namespace {

using testing_util::Config;
using testing_util::Connect;
using testing_util::ExchangeBothWays;
using testing_util::kToken;
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

// Certificates made with the openssl command: one authority the ranks trust, and another.
class Certificates {
 public:
  Certificates()
      : dir_(std::filesystem::temp_directory_path() / absl::StrFormat("hmc-certs-%d", getpid())) {
    std::filesystem::create_directories(dir_);
    MakeAuthority("ca");
    MakeAuthority("stranger-ca");
    Issue("rank0", "ca");
    Issue("rank1", "ca");
    Issue("stranger", "stranger-ca");
  }
  ~Certificates() { std::filesystem::remove_all(dir_); }

  TlsConfig For(const std::string& name) const {
    TlsConfig tls;
    tls.mode = TlsMode::kOn;
    tls.cert_file = Path(name + ".pem");
    tls.key_file = Path(name + ".key");
    tls.ca_file = Path("ca.pem");
    return tls;
  }

 private:
  std::string Path(const std::string& file) const { return (dir_ / file).string(); }
  void Run(const std::string& command) {
    ASSERT_EQ(std::system((command + " 2>/dev/null >/dev/null").c_str()), 0) << command;
  }
  void MakeAuthority(const std::string& name) {
    Run(absl::StrFormat(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        "-subj /CN=%s -keyout %s -out %s",
        name, Path(name + ".key"), Path(name + ".pem")));
  }
  void Issue(const std::string& name, const std::string& authority) {
    Run(absl::StrFormat(
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=%s "
        "-keyout %s -out %s",
        name, Path(name + ".key"), Path(name + ".csr")));
    Run(absl::StrFormat("openssl x509 -req -days 1 -in %s -CA %s -CAkey %s -CAcreateserial -out %s",
                        Path(name + ".csr"), Path(authority + ".pem"), Path(authority + ".key"),
                        Path(name + ".pem")));
  }

  std::filesystem::path dir_;
};

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
}

TEST(LinkProtection, IncompleteCertificateSettingsAreRefused) {
  TcpTransportConfig config = Config("127.0.0.1:0", 1);
  config.tls.cert_file = "/nonexistent.pem";
  auto t = TcpTransport::Create(config);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), "all three")) << t.status();
}

// The man in the middle: a process that accepts one connection, dials the real acceptor (whose
// port it reads from a pipe) and forwards both ways. It flips one bit of the byte at `flip_at`
// of the connector's bytes (none if negative), and exits with 1 if the connector's bytes ever
// showed `marker`, 0 if not.
class ManInTheMiddle {
 public:
  ManInTheMiddle(int64_t flip_at, const uint8_t* marker, size_t marker_bytes) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(any);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
    EXPECT_EQ(listen(listener_, 4), 0);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&any), &length);
    port_ = ntohs(any.sin_port);
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    // Forked before the transports start their threads: the child calls no allocator.
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[1]);
      Forward(fds[0], flip_at, marker, marker_bytes);
    }
    close(fds[0]);
    to_child_ = fds[1];
  }
  ~ManInTheMiddle() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(listener_);
    close(to_child_);
  }

  std::string address() const { return absl::StrFormat("127.0.0.1:%d", port_); }
  void ForwardTo(uint16_t port) { EXPECT_EQ(write(to_child_, &port, sizeof(port)), 2); }
  // Whether the connector's bytes showed the marker; waits for the connections to close.
  bool SawMarker() {
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
    waited_ = true;
    EXPECT_TRUE(WIFEXITED(status)) << status;
    return WIFEXITED(status) && WEXITSTATUS(status) == 1;
  }

 private:
  [[noreturn]] void Forward(int from_parent, int64_t flip_at, const uint8_t* marker,
                            size_t marker_bytes) {
    alarm(60);  // Bounded, whatever happens.
    uint16_t port = 0;
    if (read(from_parent, &port, sizeof(port)) != sizeof(port)) _exit(3);
    const int connector = accept(listener_, nullptr, nullptr);
    const int acceptor = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(port);
    if (connector < 0 || connect(acceptor, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
      _exit(4);
    }
    static uint8_t buffer[1 << 16];
    int64_t offset = 0;  // Of the connector's bytes.
    bool seen = false;
    bool open[2] = {true, true};  // connector -> acceptor, acceptor -> connector.
    while (open[0] || open[1]) {
      pollfd p[2] = {{connector, static_cast<short>(open[0] ? POLLIN : 0), 0},
                     {acceptor, static_cast<short>(open[1] ? POLLIN : 0), 0}};
      if (poll(p, 2, 1000) < 0) _exit(5);
      for (int d = 0; d < 2; ++d) {
        if (!open[d] || (p[d].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const int from = d == 0 ? connector : acceptor;
        const int into = d == 0 ? acceptor : connector;
        const ssize_t n = read(from, buffer, sizeof(buffer));
        if (n <= 0) {
          open[d] = false;
          shutdown(into, SHUT_WR);
          continue;
        }
        if (d == 0) {
          if (flip_at >= offset && flip_at < offset + n) buffer[flip_at - offset] ^= 0x20;
          seen = seen || memmem(buffer, static_cast<size_t>(n), marker, marker_bytes) != nullptr;
          offset += n;
        }
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t k = send(into, buffer + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
          if (k <= 0) break;
          sent += k;
        }
      }
    }
    _exit(seen ? 1 : 0);
  }

  int listener_ = -1;
  int to_child_ = -1;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool waited_ = false;
};

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
