// A rank that dies (SIGKILL) or hangs (SIGSTOP) in the middle of collectives: every other rank
// must end its call with an error that names the failed rank, not hang.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/coordinator.h"
#include "launcher/local_group.h"
#include "launcher/process.h"
#include "tests/testing/command.h"

namespace hmc {
namespace {

constexpr int kRanks = 4;
constexpr int kVictim = 2;
constexpr int kExitNamedPeer = 42;

using testing_util::ReadFile;

struct Group {
  std::unique_ptr<Coordinator> coordinator;
  std::vector<Process> ranks;
  std::vector<std::string> outputs;
};

// Starts kRanks endless all-reducers into `g` and waits until every one has finished a first
// call. Fatal failures (call it under ASSERT_NO_FATAL_FAILURE): a group that did not start leaves
// nothing to test, and `g`'s processes are killed by their destructors.
void StartGroup(absl::Duration heartbeat_timeout, absl::Duration collective_timeout, Group& g,
                const std::string& transport = "tcp") {
  CoordinatorConfig config;
  config.world_size = kRanks;
  config.token = RandomToken();
  config.heartbeat_timeout = heartbeat_timeout;
  auto coordinator = Coordinator::Start(config);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  g.coordinator = std::move(*coordinator);
  Options options;
  options.coordinator = g.coordinator->address().ToString();
  options.token = config.token;
  options.world_size = kRanks;
  options.timeout = collective_timeout;
  options.heartbeat_interval = absl::Milliseconds(200);
  options.transport = transport;
  setenv("UCX_NET_DEVICES", "lo", 1);  // UCX stays on loopback, as every test's traffic does.
  const std::string dir = testing::TempDir();
  for (int r = 0; r < kRanks; ++r) {
    options.rank = r;
    g.outputs.push_back(absl::StrCat(dir, "/peer_failure_rank", r, "_", getpid(), ".log"));
    auto p =
        Process::Spawn({HMC_TEST_RANK_PATH, "endless", absl::StrCat("--expect_failed=", kVictim)},
                       options.ToEnvironment(), {.output_path = g.outputs.back()});
    ASSERT_TRUE(p.ok()) << p.status();
    g.ranks.push_back(std::move(*p));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int r = 0; r < kRanks; ++r) {
    while (!absl::StrContains(ReadFile(g.outputs[r]), "running") && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    ASSERT_TRUE(absl::StrContains(ReadFile(g.outputs[r]), "running"))
        << "rank " << r << " never completed a first all-reduce:\n"
        << ReadFile(g.outputs[r]);
  }
}

void ExpectSurvivorsNameTheVictim(Group& g) {
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    // Generous bound: the ranks' own deadlines end them well before this.
    absl::StatusOr<int> code = g.ranks[r].Wait(absl::Now() + absl::Seconds(120));
    ASSERT_TRUE(code.ok()) << "rank " << r << " hung:\n" << ReadFile(g.outputs[r]);
    EXPECT_EQ(*code, kExitNamedPeer) << "rank " << r << " did not report rank " << kVictim << ":\n"
                                     << ReadFile(g.outputs[r]);
  }
}

// Over every transport that is built: UCX learns of the death from its endpoints' errors.
class KilledPeer : public testing::TestWithParam<std::string> {};

TEST_P(KilledPeer, KilledRankIsNamedByEverySurvivor) {
  // The collective deadline is long: survivors must learn of the death from their links, not
  // from running out of time.
  Group g;
  ASSERT_NO_FATAL_FAILURE(StartGroup(absl::Seconds(30), absl::Seconds(100), g, GetParam()));
  g.ranks[kVictim].Signal(SIGKILL);
  ExpectSurvivorsNameTheVictim(g);
}

std::vector<std::string> EveryTransport() {
  std::vector<std::string> transports = {"tcp"};
#ifdef HMC_HAVE_UCX
  transports.push_back("ucx");
#endif
#ifdef HMC_HAVE_OFI
  transports.push_back("ofi");
#endif
  return transports;
}

INSTANTIATE_TEST_SUITE_P(PeerFailure, KilledPeer, testing::ValuesIn(EveryTransport()));

TEST(PeerFailure, SilentRankIsDeclaredFailedByHeartbeat) {
  // A stopped process keeps its sockets open; only the coordinator's heartbeat timeout finds it.
  Group g;
  ASSERT_NO_FATAL_FAILURE(StartGroup(absl::Seconds(2), absl::Seconds(100), g));
  g.ranks[kVictim].Signal(SIGSTOP);
  ExpectSurvivorsNameTheVictim(g);
  g.ranks[kVictim].Signal(SIGKILL);
}

}  // namespace
}  // namespace hmc
