// The coordinator connection under TLS 1.3: ranks that offer it get it (keys from the token, or
// certificates), a coordinator that requires it refuses a rank that does not, a wrong token or a
// foreign certificate fails the handshake with a message that says so, and ranks come back over
// TLS to a restarted coordinator. A forwarding process between a rank and the coordinator shows
// whether what the rank sends crosses the wire in plain text.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/coordinator.h"
#include "core/coordinator_client.h"
#include "tests/testing/certificates.h"
#include "tests/testing/man_in_the_middle.h"
#include "tests/testing/raw_socket.h"

namespace hmc {
namespace {

using testing_util::Certificates;
using testing_util::ManInTheMiddle;

constexpr char kToken[] = "coordinator-tls-token";

std::unique_ptr<Coordinator> StartCoordinator(TlsConfig tls, int world_size = 2,
                                              const std::string& bind = "127.0.0.1:0") {
  CoordinatorConfig config;
  config.bind = bind;
  config.world_size = world_size;
  config.token = kToken;
  config.world_id = "w";
  config.handshake_timeout = absl::Seconds(5);
  config.heartbeat_timeout = absl::Seconds(10);
  config.tls = std::move(tls);
  auto c = Coordinator::Start(config);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

TlsConfig Mode(TlsMode mode) {
  TlsConfig tls;
  tls.mode = mode;
  return tls;
}

CoreOptions RankOptions(const std::string& coordinator, int rank, const std::string& tls,
                        const std::string& token = kToken) {
  CoreOptions o;
  o.coordinator = coordinator;
  o.token = token;
  o.world_id = "w";
  o.rank = rank;
  o.tls = tls;
  o.heartbeat_interval = absl::Milliseconds(100);
  o.connect_timeout = absl::Seconds(10);
  return o;
}

void UseCertificates(const TlsConfig& tls, CoreOptions& o) {
  o.tls = "on";
  o.tls_cert = tls.cert_file;
  o.tls_key = tls.key_file;
  o.tls_ca = tls.ca_file;
}

absl::StatusOr<std::unique_ptr<CoordinatorClient>> Join(const CoreOptions& o) {
  auto client = CoordinatorClient::Connect(o);
  if (!client.ok()) return client.status();
  absl::Status joined =
      (*client)->Join(absl::StrCat("10.0.0.", o.rank, ":1"), absl::Now() + absl::Seconds(10));
  if (!joined.ok()) return joined;
  return client;
}

bool AnyRejectionContains(const Coordinator& coordinator, absl::string_view text) {
  const std::string missing = testing_util::MissingRejections(
      [&] { return coordinator.rejections(); }, {std::string(text)});
  EXPECT_EQ(missing, "") << "no refusal says " << text;
  return missing.empty();
}

struct Wire {
  TlsMode coordinator;
  std::string rank;  // Option tls of the rank behind the forwarder.
  bool plain_text;   // Whether its bytes show on the wire.
};

class CoordinatorWireTest : public testing::TestWithParam<Wire> {};

// Rank 0 reaches the coordinator through the forwarder and publishes a value that rank 1 reads
// back intact; the forwarder reports whether the value crossed in plain text.
TEST_P(CoordinatorWireTest, WhatARankSendsIsReadableOnTheWireOnlyWithoutTls) {
  const std::string value(64, 'Q');  // What the forwarder looks for.
  ManInTheMiddle middle(/*flip_at=*/-1, reinterpret_cast<const uint8_t*>(value.data()),
                        value.size());
  std::unique_ptr<Coordinator> coordinator = StartCoordinator(Mode(GetParam().coordinator));
  ASSERT_NE(coordinator, nullptr);
  middle.ForwardTo(coordinator->address().port());
  {
    auto through_middle = Join(RankOptions(middle.address(), 0, GetParam().rank));
    ASSERT_TRUE(through_middle.ok()) << through_middle.status();
    auto direct = Join(RankOptions(coordinator->address().ToString(), 1, "on"));
    ASSERT_TRUE(direct.ok()) << direct.status();
    ASSERT_TRUE((*direct)->WaitForPeers(absl::Now() + absl::Seconds(10)).ok());
    ASSERT_TRUE((*through_middle)->Put("k", value, absl::Now() + absl::Seconds(10)).ok());
    absl::StatusOr<std::string> read = (*direct)->Get("k", absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(*read, value);
  }
  coordinator.reset();  // Closes the forwarded connection: the forwarder ends.
  EXPECT_EQ(middle.SawMarker(), GetParam().plain_text);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, CoordinatorWireTest,
    testing::Values(Wire{TlsMode::kOn, "on", false},
                    // A rank that offers TLS gets it from a coordinator that does not require it.
                    Wire{TlsMode::kOff, "on", false},
                    // The control: without TLS the forwarder does see the value.
                    Wire{TlsMode::kOff, "off", true}),
    [](const testing::TestParamInfo<Wire>& info) {
      return absl::StrFormat("Coordinator%sRank%s", TlsModeName(info.param.coordinator),
                             info.param.rank);
    });

TEST(CoordinatorTls, APlainRankIsRefusedWhereTlsIsRequired) {
  std::unique_ptr<Coordinator> coordinator = StartCoordinator(Mode(TlsMode::kOn));
  ASSERT_NE(coordinator, nullptr);
  auto plain = Join(RankOptions(coordinator->address().ToString(), 0, "off"));
  ASSERT_FALSE(plain.ok());
  EXPECT_TRUE(absl::StrContains(plain.status().message(), "requires TLS")) << plain.status();
  EXPECT_TRUE(AnyRejectionContains(*coordinator, "requires TLS from 127.0.0.1:"));
  // The same rank with TLS is welcome.
  auto protected_rank = Join(RankOptions(coordinator->address().ToString(), 0, "on"));
  EXPECT_TRUE(protected_rank.ok()) << protected_rank.status();
}

// The key comes from the token: another token cannot finish the handshake, and the refusal says
// where it failed on both sides.
TEST(CoordinatorTls, AWrongTokenFailsTheHandshake) {
  std::unique_ptr<Coordinator> coordinator = StartCoordinator(Mode(TlsMode::kOn));
  ASSERT_NE(coordinator, nullptr);
  const std::string address = coordinator->address().ToString();
  auto client = CoordinatorClient::Connect(RankOptions(address, 0, "on", "another-token"));
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::StrContains(client.status().message(), "TLS handshake failed"))
      << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), address)) << client.status();
  EXPECT_TRUE(AnyRejectionContains(*coordinator, "TLS handshake failed"));
}

TEST(CoordinatorTls, CertificatesFromTheTrustedAuthorityJoinAndOthersAreRefused) {
  Certificates certificates;
  std::unique_ptr<Coordinator> coordinator = StartCoordinator(certificates.For("rank0"), 1);
  ASSERT_NE(coordinator, nullptr);
  const std::string address = coordinator->address().ToString();
  // A certificate another authority signed: TLS 1.3 lets the client finish before the
  // coordinator checks it, so its join is what fails, on both sides naming TLS.
  CoreOptions stranger = RankOptions(address, 0, "on");
  UseCertificates(certificates.For("stranger"), stranger);
  auto refused = Join(stranger);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "TLS")) << refused.status();
  EXPECT_TRUE(AnyRejectionContains(*coordinator, "certificate"));
  // Keys from the token where the coordinator presents a certificate: the rank refuses a
  // handshake that did not use its key (nothing verified that certificate).
  auto without = CoordinatorClient::Connect(RankOptions(address, 0, "on"));
  ASSERT_FALSE(without.ok());
  EXPECT_TRUE(absl::StrContains(without.status().message(), "did not use the key"))
      << without.status();
  CoreOptions trusted = RankOptions(address, 0, "on");
  UseCertificates(certificates.For("rank1"), trusted);
  auto joined = Join(trusted);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_TRUE((*joined)->WaitForPeers(absl::Now() + absl::Seconds(10)).ok());
}

// A coordinator restarted at the same address: the ranks dial it again, run TLS again (a new
// challenge, a new key) and the group is rebuilt from them.
TEST(CoordinatorTls, RanksComeBackOverTlsToARestartedCoordinator) {
  std::unique_ptr<Coordinator> coordinator = StartCoordinator(Mode(TlsMode::kOn));
  ASSERT_NE(coordinator, nullptr);
  const std::string address = coordinator->address().ToString();
  std::vector<std::unique_ptr<CoordinatorClient>> ranks;
  for (int r = 0; r < 2; ++r) {
    auto c = Join(RankOptions(address, r, "on"));
    ASSERT_TRUE(c.ok()) << c.status();
    ranks.push_back(std::move(*c));
  }
  ASSERT_TRUE(ranks[0]->WaitForPeers(absl::Now() + absl::Seconds(10)).ok());
  coordinator.reset();
  coordinator = StartCoordinator(Mode(TlsMode::kOn), 2, address);
  ASSERT_NE(coordinator, nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  while (coordinator->table().epoch == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const PeerTable table = coordinator->table();
  EXPECT_EQ(table.epoch, 1u);  // Every member came back: the same epoch goes on.
  ASSERT_EQ(table.peers.size(), 2u);
  EXPECT_TRUE(table.peers[0].alive && table.peers[1].alive);
  // And the connection carries requests again.
  EXPECT_TRUE(ranks[1]->Put("after", "restart", absl::Now() + absl::Seconds(10)).ok());
  auto read = ranks[0]->Get("after", absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "restart");
}

}  // namespace
}  // namespace hmc
