// What the UCX transport refuses: peers of another token, world or epoch, and addresses that are
// not UCX's. Both ends of a refused link fail their ConnectAll with an error that names the peer
// and the cause. The Channel contract itself runs in channel_contract_test.cc.
#include "transports/ucx/ucx_transport.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"

namespace hmc {
namespace {

UcxTransportConfig Config(const std::string& token, const std::string& world = "w",
                          uint32_t epoch = 1) {
  UcxTransportConfig config;
  config.token = token;
  config.world_id = world;
  config.epoch = epoch;
  config.resources = {"tcp", "lo"};
  return config;
}

// Connects two transports to each other; returns each one's ConnectAll outcome.
std::vector<absl::Status> ConnectPair(const UcxTransportConfig& a, const UcxTransportConfig& b) {
  std::vector<std::unique_ptr<UcxTransport>> transports;
  for (const UcxTransportConfig& config : {a, b}) {
    auto t = UcxTransport::Create(config);
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return {t.status(), t.status()};
    transports.push_back(std::move(*t));
  }
  const std::vector<PeerAddress> peers = {{0, transports[0]->address(), "rank 0"},
                                          {1, transports[1]->address(), "rank 1"}};
  std::vector<absl::Status> outcomes(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      outcomes[r] = transports[r]->ConnectAll(r, peers, absl::Now() + absl::Seconds(10)).status();
    });
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

TEST(UcxTransport, PeersWithTheSameTokenConnect) {
  for (const absl::Status& s : ConnectPair(Config("secret"), Config("secret"))) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(UcxTransport, AWrongTokenIsRefusedAndBothEndsSayWhy) {
  const std::vector<absl::Status> s = ConnectPair(Config("secret"), Config("guess"));
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(s[r].ok()) << "rank " << r;
    EXPECT_TRUE(absl::StrContains(s[r].message(), absl::StrCat("rank ", 1 - r, ":"))) << s[r];
    EXPECT_TRUE(absl::StrContains(s[r].message(), "wrong token")) << s[r];
  }
}

TEST(UcxTransport, AnotherWorldOrEpochIsRefused) {
  for (const auto& [b, cause] : {std::pair{Config("secret", "other"), "world"},
                                 std::pair{Config("secret", "w", 2), "epoch"}}) {
    const std::vector<absl::Status> s = ConnectPair(Config("secret"), b);
    for (int r = 0; r < 2; ++r) {
      ASSERT_FALSE(s[r].ok()) << "rank " << r;
      EXPECT_TRUE(absl::StrContains(s[r].message(), cause)) << s[r];
    }
  }
}

TEST(UcxTransport, AnAddressThatIsNotUcxsFailsNamingThePeer) {
  auto t = UcxTransport::Create(Config("secret"));
  ASSERT_TRUE(t.ok()) << t.status();
  for (const std::string address : {"127.0.0.1:4000", "ucx:host:zz", "ucx:host:", "ucx:h:0a0"}) {
    const std::vector<PeerAddress> peers = {{0, (*t)->address(), "rank 0"},
                                            {1, address, "rank 1 (elsewhere)"}};
    const absl::Status s = (*t)->ConnectAll(0, peers, absl::Now() + absl::Seconds(5)).status();
    ASSERT_FALSE(s.ok()) << address;
    EXPECT_TRUE(absl::StrContains(s.message(), "rank 1 (elsewhere): publishes no UCX address"))
        << s;
  }
}

TEST(UcxTransport, AnEmptyTokenIsRefusedUnlessInsecure) {
  EXPECT_FALSE(UcxTransport::Create(Config("")).ok());
  UcxTransportConfig insecure = Config("");
  insecure.insecure = true;
  EXPECT_TRUE(UcxTransport::Create(insecure).ok());
}

}  // namespace
}  // namespace hmc
