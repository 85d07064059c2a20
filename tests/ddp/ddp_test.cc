// The libtorch integration across real processes: each case starts 2–4 ranks of hmc-test-ddp
// (ddp_rank.cc) with a coordinator; the ranks check their results against references computed
// without communication.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "launcher/local_group.h"

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

TEST(Ddp, DifferentModelsAreRefusedOnEveryRank) { EXPECT_EQ(RunGroup(3, {"mismatch"}), 0); }

}  // namespace
}  // namespace hmc
