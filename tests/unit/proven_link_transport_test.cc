// What the transports whose links prove the token over their own messages (UCX, libfabric)
// refuse: peers of another token, world or epoch, and addresses that are not theirs. Both ends of
// a refused link fail their ConnectAll with an error that names the peer and the cause. The
// Channel contract itself runs in channel_contract_test.cc.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "transports/transport.h"
#ifdef HMC_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif
#ifdef HMC_HAVE_OFI
#include "transports/ofi/ofi_transport.h"
#endif

namespace hmc {
namespace {

struct Settings {
  std::string token;
  std::string world = "w";
  uint32_t epoch = 1;
  bool insecure = false;
};

struct Kind {
  std::string name;     // As addresses and messages name it.
  std::string message;  // "UCX", "libfabric".
  std::function<absl::StatusOr<std::unique_ptr<Transport>>(const Settings&)> make;
};
void PrintTo(const Kind& kind, std::ostream* os) { *os << kind.name; }

template <typename Config>
Config ConfigOf(const Settings& s) {
  Config config;
  config.token = s.token;
  config.world_id = s.world;
  config.epoch = s.epoch;
  config.insecure = s.insecure;
  return config;
}

std::vector<Kind> EveryKind() {
  std::vector<Kind> kinds;
#ifdef HMC_HAVE_UCX
  kinds.push_back({"ucx", "UCX", [](const Settings& s) {
                     UcxTransportConfig config = ConfigOf<UcxTransportConfig>(s);
                     config.resources = {"tcp", "lo"};
                     auto t = UcxTransport::Create(config);
                     if (!t.ok()) return absl::StatusOr<std::unique_ptr<Transport>>(t.status());
                     return absl::StatusOr<std::unique_ptr<Transport>>(std::move(*t));
                   }});
#endif
#ifdef HMC_HAVE_OFI
  kinds.push_back({"ofi", "libfabric", [](const Settings& s) {
                     OfiTransportConfig config = ConfigOf<OfiTransportConfig>(s);
                     config.resources = {"tcp;ofi_rxm", "127.0.0.1"};
                     auto t = OfiTransport::Create(config);
                     if (!t.ok()) return absl::StatusOr<std::unique_ptr<Transport>>(t.status());
                     return absl::StatusOr<std::unique_ptr<Transport>>(std::move(*t));
                   }});
#endif
  return kinds;
}

class ProvenLinkTransport : public testing::TestWithParam<Kind> {
 protected:
  // Connects two transports to each other; returns each one's ConnectAll outcome.
  std::vector<absl::Status> ConnectPair(const Settings& a, const Settings& b) {
    std::vector<std::unique_ptr<Transport>> transports;
    for (const Settings& settings : {a, b}) {
      auto t = GetParam().make(settings);
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
};

TEST_P(ProvenLinkTransport, PeersWithTheSameTokenConnect) {
  for (const absl::Status& s : ConnectPair({"secret"}, {"secret"})) EXPECT_TRUE(s.ok()) << s;
}

TEST_P(ProvenLinkTransport, AWrongTokenIsRefusedAndBothEndsSayWhy) {
  const std::vector<absl::Status> s = ConnectPair({"secret"}, {"guess"});
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(s[r].ok()) << "rank " << r;
    EXPECT_TRUE(absl::StrContains(s[r].message(), absl::StrCat("rank ", 1 - r, ":"))) << s[r];
    EXPECT_TRUE(absl::StrContains(s[r].message(), "wrong token")) << s[r];
  }
}

TEST_P(ProvenLinkTransport, AnotherWorldOrEpochIsRefused) {
  for (const auto& [b, cause] :
       {std::pair{Settings{"secret", "other"}, "world"}, {Settings{"secret", "w", 2}, "epoch"}}) {
    const std::vector<absl::Status> s = ConnectPair({"secret"}, b);
    for (int r = 0; r < 2; ++r) {
      ASSERT_FALSE(s[r].ok()) << "rank " << r;
      EXPECT_TRUE(absl::StrContains(s[r].message(), cause)) << s[r];
    }
  }
}

TEST_P(ProvenLinkTransport, AnAddressThatIsNotItsOwnKindFailsNamingThePeer) {
  auto t = GetParam().make({"secret"});
  ASSERT_TRUE(t.ok()) << t.status();
  const std::string kind = GetParam().name;
  for (const std::string& address : {std::string("127.0.0.1:4000"), kind + ":host:zz",
                                     kind + ":host:", kind + ":h:0a0", std::string("other:h:00")}) {
    const std::vector<PeerAddress> peers = {{0, (*t)->address(), "rank 0"},
                                            {1, address, "rank 1 (elsewhere)"}};
    const absl::Status s = (*t)->ConnectAll(0, peers, absl::Now() + absl::Seconds(5)).status();
    ASSERT_FALSE(s.ok()) << address;
    EXPECT_TRUE(absl::StrContains(
        s.message(), absl::StrCat("rank 1 (elsewhere): publishes no ", GetParam().message)))
        << s;
  }
}

TEST_P(ProvenLinkTransport, AnEmptyTokenIsRefusedUnlessInsecure) {
  EXPECT_FALSE(GetParam().make({""}).ok());
  Settings insecure{""};
  insecure.insecure = true;
  EXPECT_TRUE(GetParam().make(insecure).ok());
}

INSTANTIATE_TEST_SUITE_P(Every, ProvenLinkTransport, testing::ValuesIn(EveryKind()),
                         [](const testing::TestParamInfo<Kind>& info) { return info.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ProvenLinkTransport);

}  // namespace
}  // namespace hmc
