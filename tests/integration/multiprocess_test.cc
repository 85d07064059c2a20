// Multi-process collectives over real sockets on 127.0.0.1: a coordinator in this process and
// N copies of hmc-test-rank, each checking every result against a serial reference; over TCP, and
// over UCX where it is built (every link, or only links inside a zone).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <ostream>
#include <string>
#include <vector>

#include "launcher/local_group.h"

namespace hmc {
namespace {

absl::StatusOr<int> RunRanks(int ranks, std::vector<std::string> args,
                             absl::Duration timeout = absl::Minutes(10),
                             const std::string& transport = "tcp") {
  // UCX stays on loopback, as every test's traffic does.
  setenv("UCX_NET_DEVICES", "lo", 1);
  LocalGroupSpec spec;
  spec.options.transport = transport;
  spec.argv = {HMC_TEST_RANK_PATH};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.ranks = ranks;
  spec.timeout = timeout;
  spec.zones = {"zone-a", "zone-b"};
  return RunLocalGroup(spec);
}

constexpr bool kSanitized = HMC_SANITIZED;

struct MatrixCase {
  int ranks;
  std::string transport;  // The option: ranks alternate between two zones.
};
void PrintTo(const MatrixCase& c, std::ostream* os) { *os << c.ranks << " " << c.transport; }

class MatrixTest : public testing::TestWithParam<MatrixCase> {};

TEST_P(MatrixTest, EveryCollectiveDtypeOpAlgorithmAndSizeMatchesTheReference) {
  const int ranks = GetParam().ranks;
  // 64 MiB buffers in every rank of eight would need more memory and time than CI has; the large
  // case runs for up to four ranks, in the Release build (under ASan it took half the matrix's
  // time, for paths the 4 MB cases already take).
  std::vector<std::string> args = {"matrix"};
  if (ranks <= 4 && !kSanitized) args.push_back("--large");
  absl::StatusOr<int> code = RunRanks(ranks, args, absl::Minutes(10), GetParam().transport);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << "a rank reported a wrong result or an error (see its output above)";
}

// Under ASan eight ranks on CI's two cores take 100 s: the sanitizer build checks every path
// with two to four ranks (a power of two and not, both zones), the Release build adds eight.
// UCX runs every link with two and three ranks, and with four only the links inside each zone
// (the others TCP): a group on two transports at once.
std::vector<MatrixCase> MatrixCases() {
  std::vector<MatrixCase> cases;
  for (int ranks : kSanitized ? std::vector<int>{2, 3, 4} : std::vector<int>{2, 3, 4, 8}) {
    cases.push_back({ranks, "tcp"});
  }
#ifdef HMC_HAVE_UCX
  cases.push_back({2, "ucx"});
  cases.push_back({3, "ucx"});
  cases.push_back({4, "intra=ucx,inter=tcp"});
#endif
#ifdef HMC_HAVE_OFI
  cases.push_back({2, "ofi"});
  cases.push_back({3, "ofi"});
  cases.push_back({4, "intra=ofi,inter=ucx"});
#endif
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Ranks, MatrixTest, testing::ValuesIn(MatrixCases()),
                         [](const testing::TestParamInfo<MatrixCase>& info) {
                           std::string name =
                               std::to_string(info.param.ranks) + "_" + info.param.transport;
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

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
