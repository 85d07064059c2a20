// The libtorch integration across real processes: each case starts 2–4 ranks of hmc-test-ddp
// (ddp_rank.cc) with a coordinator; the ranks check their results against references computed
// without communication.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/coordinator.h"
#include "launcher/local_group.h"
#include "launcher/process.h"
#include "tests/testing/command.h"

namespace hmc {
namespace {

int RunGroup(int ranks, std::vector<std::string> args) {
  LocalGroupSpec spec;
  spec.argv = {HMC_TEST_DDP_PATH};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.ranks = ranks;
  spec.zones = {"zone-a", "zone-b"};
  spec.options.probe = false;
  spec.timeout = absl::Minutes(3);
  absl::StatusOr<int> code = RunLocalGroup(spec);
  EXPECT_TRUE(code.ok()) << code.status();
  return code.ok() ? *code : -1;
}

class DdpEquivalence : public testing::TestWithParam<int> {};

TEST_P(DdpEquivalence, HelperMatchesOneProcessOnTheUnionOfBatches) {
  EXPECT_EQ(RunGroup(GetParam(), {"ddp"}), 0);
}

TEST_P(DdpEquivalence, ReducerWithTheHmcHookMatchesTheHelper) {
  EXPECT_EQ(RunGroup(GetParam(), {"reducer"}), 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpEquivalence, testing::Values(2, 3, 4),
                         [](const auto& info) { return absl::StrCat(info.param, "ranks"); });

TEST(ProcessGroupHmc, CollectivesMatchLocalReferences) { EXPECT_EQ(RunGroup(3, {"pg"}), 0); }

TEST(CollaborativeOptimizer, StepsAtTheTargetWithSampleWeightedAverages) {
  EXPECT_EQ(RunGroup(3, {"collab"}), 0);
}

TEST(CollaborativeOptimizer, DelayedUpdatesKeepRanksEqual) {
  EXPECT_EQ(RunGroup(2, {"collab", "--delay"}), 0);
}

TEST(DiLoCo, MatchesReplicasSimulatedInOneProcess) { EXPECT_EQ(RunGroup(3, {"diloco"}), 0); }

TEST(DiLoCo, StreamingFragmentsEndWithEqualOuterParameters) {
  EXPECT_EQ(RunGroup(3, {"diloco-stream"}), 0);
}

TEST(DiLoCo, RestoresRankZerosCheckpointOnEveryRankOrRefusesItOnEvery) {
  EXPECT_EQ(RunGroup(3, {"diloco-restore"}), 0);
}

TEST(Ddp, DifferentModelsAreRefusedOnEveryRank) { EXPECT_EQ(RunGroup(3, {"mismatch"}), 0); }

// A coordinator and ranks of hmc-test-ddp started one by one, not as a local group, which would
// stop everyone when one dies.
struct HandStartedGroup {
  explicit HandStartedGroup(int world_size) {
    CoordinatorConfig config;
    config.world_size = world_size;
    config.token = RandomToken();
    absl::StatusOr<std::unique_ptr<Coordinator>> started = Coordinator::Start(config);
    EXPECT_TRUE(started.ok()) << started.status();
    if (!started.ok()) return;
    coordinator = std::move(*started);
    options.coordinator = coordinator->address().ToString();
    options.token = config.token;
    options.world_size = world_size;
    options.probe = false;
    options.timeout = absl::Seconds(60);
  }
  // Starts `mode` as `rank` (-1: whichever the coordinator gives), its output in outputs.
  absl::Status Spawn(const std::string& mode, int rank) {
    options.rank = rank;
    outputs.push_back(
        absl::StrCat(testing::TempDir(), "/ddp_", mode, ranks.size(), "_", getpid(), ".log"));
    absl::StatusOr<Process> p = Process::Spawn({HMC_TEST_DDP_PATH, mode}, options.ToEnvironment(),
                                               {.output_path = outputs.back()});
    if (!p.ok()) return p.status();
    ranks.push_back(std::move(*p));
    return absl::OkStatus();
  }

  std::unique_ptr<Coordinator> coordinator;
  Options options;
  std::vector<Process> ranks;
  std::vector<std::string> outputs;
};

// The fault-tolerant helper when a rank dies mid-training (ddp_rank.cc, "survive"): the others
// go on and match a reference of the live ranks' batches.
TEST(Ddp, FaultTolerantHelperTrainsOnWithTheSurvivors) {
  constexpr int kRanks = 3;
  HandStartedGroup group(kRanks);
  ASSERT_TRUE(group.coordinator != nullptr);
  std::vector<Process>& ranks = group.ranks;
  std::vector<std::string>& outputs = group.outputs;
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(group.Spawn("survive", r).ok());
  for (int r = 0; r < kRanks; ++r) {
    absl::StatusOr<int> code = ranks[r].Wait(absl::Now() + absl::Minutes(2));
    ASSERT_TRUE(code.ok()) << "rank " << r << " hung:\n" << testing_util::ReadFile(outputs[r]);
    EXPECT_EQ(*code, r == kRanks - 1 ? 128 + SIGKILL : 0) << "rank " << r << ":\n"
                                                          << testing_util::ReadFile(outputs[r]);
  }
}

// Fault-tolerant DiLoCo when a rank dies before a sync (ddp_rank.cc, "diloco-survive").
TEST(DiLoCo, FaultTolerantSyncsGoOnWithTheSurvivors) {
  constexpr int kRanks = 3;
  HandStartedGroup group(kRanks);
  ASSERT_TRUE(group.coordinator != nullptr);
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(group.Spawn("diloco-survive", r).ok());
  for (int r = 0; r < kRanks; ++r) {
    absl::StatusOr<int> code = group.ranks[r].Wait(absl::Now() + absl::Minutes(2));
    ASSERT_TRUE(code.ok()) << "rank " << r << " hung:\n"
                           << testing_util::ReadFile(group.outputs[r]);
    EXPECT_EQ(*code, r == kRanks - 1 ? 128 + SIGKILL : 0)
        << "rank " << r << ":\n"
        << testing_util::ReadFile(group.outputs[r]);
  }
}

// A killed rank's replacement joins fault-tolerant training (ddp_rank.cc, "rejoin" with the DDP
// helper, "reducer-rejoin" with libtorch's Reducer and the fault-tolerant hook, "collab-rejoin"
// with the collaborative optimizer, "diloco-rejoin" with fault-tolerant DiLoCo): it takes the
// group's parameters, Adam's moments and step count (DiLoCo: the outer parameters, momentum and
// sync count), and at the end every rank holds the same bits, the replacement included.
class Rejoin : public testing::TestWithParam<std::string> {};

TEST_P(Rejoin, ReplacementRankJoinsWithTheGroupsStateAndStaysInStep) {
  constexpr int kRanks = 3;
  HandStartedGroup group(kRanks);
  ASSERT_TRUE(group.coordinator != nullptr);
  std::vector<Process>& ranks = group.ranks;
  std::vector<std::string>& outputs = group.outputs;
  auto spawn = [&](int rank) { ASSERT_TRUE(group.Spawn(GetParam(), rank).ok()); };
  for (int r = 0; r < kRanks; ++r) spawn(r);
  // The victim kills itself in step 5; its replacement starts once it is gone.
  absl::StatusOr<int> victim = ranks[kRanks - 1].Wait(absl::Now() + absl::Minutes(2));
  ASSERT_TRUE(victim.ok()) << testing_util::ReadFile(outputs[kRanks - 1]);
  EXPECT_EQ(*victim, 128 + SIGKILL);
  spawn(-1);
  std::set<std::string> finals;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (r == kRanks - 1) continue;
    absl::StatusOr<int> code = ranks[r].Wait(absl::Now() + absl::Minutes(2));
    const std::string output = testing_util::ReadFile(outputs[r]);
    ASSERT_TRUE(code.ok()) << "rank " << r << " hung:\n" << output;
    EXPECT_EQ(*code, 0) << "rank " << r << ":\n" << output;
    const size_t at = output.find("final ");
    ASSERT_NE(at, std::string::npos) << output;
    std::string line = output.substr(at, output.find('\n', at) - at);
    // Every rank holds the same step and bits; only the id and the joiner flag differ.
    finals.insert(line.substr(line.find(" step=")));
    if (r == kRanks) {
      EXPECT_TRUE(absl::StrContains(line, "joiner=1")) << line;
    }
  }
  EXPECT_EQ(finals.size(), 1u) << absl::StrJoin(finals, "\n");
}

INSTANTIATE_TEST_SUITE_P(Modes, Rejoin,
                         testing::Values("rejoin", "reducer-rejoin", "collab-rejoin",
                                         "diloco-rejoin"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           if (info.param == "rejoin") return std::string("DdpHelper");
                           if (info.param == "reducer-rejoin") return std::string("ReducerHook");
                           if (info.param == "diloco-rejoin") return std::string("DiLoCo");
                           return std::string("CollaborativeOptimizer");
                         });

}  // namespace
}  // namespace hmc
