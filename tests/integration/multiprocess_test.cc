// Multi-process collectives over real TCP sockets on 127.0.0.1: a coordinator in this process and
// N copies of hmc-test-rank, each checking every result against a serial reference.
#include <gtest/gtest.h>

#include <vector>

#include "launcher/local_group.h"

namespace hmc {
namespace {

absl::StatusOr<int> RunRanks(int ranks, std::vector<std::string> args,
                             absl::Duration timeout = absl::Minutes(10)) {
  LocalGroupSpec spec;
  spec.argv = {HMC_TEST_RANK_PATH};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.ranks = ranks;
  spec.timeout = timeout;
  spec.zones = {"zone-a", "zone-b"};
  return RunLocalGroup(spec);
}

#ifdef __SANITIZE_ADDRESS__
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

class MatrixTest : public testing::TestWithParam<int> {};

TEST_P(MatrixTest, EveryCollectiveDtypeOpAlgorithmAndSizeMatchesTheReference) {
  const int ranks = GetParam();
  // 64 MiB buffers in every rank of eight would need more memory and time than CI has; the large
  // case runs for up to four ranks, in the Release build (under ASan it took half the matrix's
  // time, for paths the 4 MB cases already take).
  std::vector<std::string> args = {"matrix"};
  if (ranks <= 4 && !kSanitized) args.push_back("--large");
  absl::StatusOr<int> code = RunRanks(ranks, args);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << "a rank reported a wrong result or an error (see its output above)";
}

// Under ASan eight ranks on CI's two cores take 100 s: the sanitizer build checks every path
// with two to four ranks (a power of two and not, both zones), the Release build adds eight.
INSTANTIATE_TEST_SUITE_P(Ranks, MatrixTest,
                         testing::ValuesIn(kSanitized ? std::vector<int>{2, 3, 4}
                                                      : std::vector<int>{2, 3, 4, 8}));

TEST(ArgumentCheck, MismatchesAreReportedOnEveryRankAndTheGroupRecovers) {
  absl::StatusOr<int> code = RunRanks(3, {"mismatch"});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

// Ranks on one host have no network path to probe: every link is local, so the group keeps its
// local stream count without measuring.
TEST(StreamProbe, LocalRanksSkipTheMeasurement) {
  absl::StatusOr<int> code = RunRanks(3, {"streams", "--expect_local"});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace hmc
