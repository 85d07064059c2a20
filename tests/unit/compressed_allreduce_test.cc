// All-reduce with codecs on the links (butterfly and hierarchical), over the inproc transport:
// every rank ends bit-identical, close to the exact average computed independently in double,
// non-finite values arrive, error feedback makes the steps' sum converge, and ranks that disagree
// on codecs are refused before data moves.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "absl/strings/match.h"
#include "collectives/communicator.h"
#include "core/mutex.h"
#include "tests/testing/inproc_group.h"

namespace hmc {
namespace {

constexpr size_t kCount = 50021;  // Prime: parts and blocks end unevenly.

std::vector<float> Gradient(int rank, size_t count, int step = 0) {
  std::mt19937 random(1000 * rank + step);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = normal(random) * (1 + rank);
  return v;
}

std::vector<double> ExactAverage(int ranks, size_t count, int step = 0) {
  std::vector<double> avg(count, 0.0);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> g = Gradient(r, count, step);
    for (size_t i = 0; i < count; ++i) avg[i] += g[i];
  }
  for (double& x : avg) x /= ranks;
  return avg;
}

double RelativeL2(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(err / norm);
}

struct Case {
  const char* algo;
  const char* zones;  // One letter per rank.
  const char* inter;
  const char* intra;
  double max_error;  // Relative L2 error of one step's average.
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.algo << " zones " << c.zones << " inter " << c.inter << " intra " << c.intra;
}

class CompressedAllReduce : public testing::TestWithParam<Case> {};

TEST_P(CompressedAllReduce, BitIdenticalOnEveryRankAndCloseToTheExactAverage) {
  const Case c = GetParam();
  const int n = static_cast<int>(std::strlen(c.zones));
  std::vector<std::string> zones;
  for (const char* z = c.zones; *z != 0; ++z) zones.emplace_back(1, *z);
  Options options;
  options.algo = c.algo;
  options.codec_inter = c.inter;
  options.codec_intra = c.intra;
  std::vector<std::vector<float>> results(n);
  RunGroup(
      n,
      [&](int rank, Communicator& comm) {
        std::vector<float> data = Gradient(rank, kCount);
        Buffer b{data.data(), kCount, DType::kF32};
        auto work = comm.AllReduce(b, b, ReduceOp::kAvg);
        ASSERT_TRUE(work->Wait().ok()) << work->Wait();
        EXPECT_TRUE(absl::StrContains(work->report().plan, c.inter)) << work->report().plan;
        results[rank] = std::move(data);
      },
      options, zones);
  for (int r = 1; r < n; ++r) {
    ASSERT_EQ(std::memcmp(results[r].data(), results[0].data(), kCount * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
  }
  const double error = RelativeL2(results[0], ExactAverage(n, kCount));
  EXPECT_LE(error, c.max_error);
  EXPECT_GT(error, 0.0) << "a lossy codec left no trace: was it used?";
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, CompressedAllReduce,
    testing::Values(Case{"butterfly", "abcd", "int8:block=256", "none", 0.01},
                    Case{"butterfly", "aabb", "int8:block=64", "fp16", 0.01},
                    Case{"butterfly", "abc", "fp16", "none", 1e-3},
                    Case{"butterfly", "ab", "bf16", "none", 8e-3},
                    Case{"butterfly", "abcd", "uniform8", "none", 0.05},
                    Case{"butterfly", "abcd", "quantile8", "none", 0.05},
                    Case{"hierarchical", "aabb", "int8:block=256", "none", 0.01},
                    Case{"hierarchical", "aaabbc", "int8:block=256", "none", 0.01},
                    Case{"hierarchical", "aabbcc", "powersgd:rank=4", "none", 1.0},
                    Case{"hierarchical", "aabb", "topk:ratio=0.05", "none", 1.0}),
    [](const testing::TestParamInfo<Case>& info) {
      std::string name = std::string(info.param.algo) + "_" + info.param.zones + "_" +
                         info.param.inter + "_" + info.param.intra;
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// Zones {0, 1} and {2, 3}: with int8 across zones, a rank's zone mate gets the encoded bytes of
// its shard's result (what crossed the zones), not the shard's f32 values: the in-zone
// all-gather shrinks about fourfold, and the mates still end bit-identical.
TEST(CompressedAllReduceTraffic, HierarchicalRelaysEncodedResultsInsideTheZone) {
  constexpr size_t kValues = 1 << 16;
  Options options;
  options.algo = "hierarchical";
  options.codec_inter = "int8";
  options.check_args = false;  // Count only the data's bytes.
  RunGroup(4,
           [&](int rank, Communicator& comm) {
             std::vector<float> data = Gradient(rank, kValues);
             Buffer b{data.data(), kValues, DType::kF32};
             ASSERT_TRUE(comm.AllReduce(b, b, ReduceOp::kAvg)->Wait().ok());
             const uint64_t to_mate = comm.link_stats()[rank ^ 1].bytes_sent;
             const uint64_t half = kValues / 2 * sizeof(float);  // The reduce-scatter's raw half.
             EXPECT_GT(to_mate, half + half / 4 - 64) << "rank " << rank;
             EXPECT_LT(to_mate, half + half / 4 + half / 20) << "rank " << rank;
           },
           options, {"a", "a", "b", "b"});
}

TEST(CompressedAllReduceNonFinite, NanAndInfArriveAndTheRestStaysClose) {
  constexpr int kRanks = 3;
  std::vector<std::vector<float>> results(kRanks);
  Options options;
  options.algo = "butterfly";
  options.codec_inter = "int8:block=256";
  RunGroup(kRanks,
           [&](int rank, Communicator& comm) {
             std::vector<float> data = Gradient(rank, kCount);
             if (rank == 1) data[10] = std::nanf("");
             if (rank == 2) data[kCount - 1] = INFINITY;
             Buffer b{data.data(), kCount, DType::kF32};
             ASSERT_TRUE(comm.AllReduce(b, b, ReduceOp::kSum)->Wait().ok());
             results[rank] = std::move(data);
           },
           options, {"a", "b", "c"});
  std::vector<double> sum = ExactAverage(kRanks, kCount);
  for (double& x : sum) x *= kRanks;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(std::isnan(results[r][10])) << r;
    EXPECT_EQ(results[r][kCount - 1], INFINITY) << r;
    results[r][10] = static_cast<float>(sum[10]);
    results[r][kCount - 1] = static_cast<float>(sum[kCount - 1]);
    EXPECT_LE(RelativeL2(results[r], sum), 0.01) << r;
  }
}

// Averaging the same gradients step after step: what each step's encoding leaves out is sent
// later, so the mean of the results approaches the exact average; without feedback it does not.
TEST(CompressedAllReduceFeedback, MeanOverStepsConvergesToTheExactAverage) {
  constexpr int kRanks = 3;
  constexpr int kSteps = 40;
  constexpr size_t kSmall = 4099;
  const std::vector<double> exact = ExactAverage(kRanks, kSmall);
  double first_error = 0, mean_error_with = 0, mean_error_without = 0;
  for (const bool feedback : {true, false}) {
    Mutex mu;
    std::vector<float> mean(kSmall, 0.0f);
    Options options;
    options.algo = "butterfly";
    options.codec_inter = "topk:ratio=0.2";
    RunGroup(kRanks,
             [&](int rank, Communicator& comm) {
               CodecFeedback state;
               std::vector<double> sum(kSmall, 0.0);
               for (int step = 0; step < kSteps; ++step) {
                 std::vector<float> data = Gradient(rank, kSmall);
                 CallOptions call;
                 call.feedback = feedback ? &state : nullptr;
                 Buffer b{data.data(), kSmall, DType::kF32};
                 ASSERT_TRUE(comm.AllReduce(b, b, ReduceOp::kAvg, call)->Wait().ok());
                 for (size_t i = 0; i < kSmall; ++i) sum[i] += data[i];
                 if (step == 0 && rank == 0) first_error = RelativeL2(data, exact);
               }
               if (rank != 0) return;
               MutexLock lock(&mu);
               for (size_t i = 0; i < kSmall; ++i) mean[i] = static_cast<float>(sum[i] / kSteps);
             },
             options, {"a", "b", "c"});
    (feedback ? mean_error_with : mean_error_without) = RelativeL2(mean, exact);
  }
  EXPECT_LT(mean_error_with, first_error / 5)
      << "one step " << first_error << ", mean of " << kSteps << " " << mean_error_with;
  EXPECT_GT(mean_error_without, first_error / 2) << "without feedback the loss repeats";
}

TEST(CompressedAllReduceMismatch, RanksThatDisagreeOnCodecsAreRefusedBeforeDataMoves) {
  Options options;
  options.algo = "butterfly";
  RunGroup(3,
           [&](int rank, Communicator& comm) {
             std::vector<float> data(1000, 1.0f);
             CallOptions call;
             call.codec_inter = rank == 1 ? "fp16" : "int8";
             Buffer b{data.data(), data.size(), DType::kF32};
             absl::Status s = comm.AllReduce(b, b, ReduceOp::kSum, call)->Wait();
             EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
             EXPECT_TRUE(absl::StrContains(s.message(), "plan")) << s;
             // The communicator stays usable.
             call.codec_inter = "fp16";
             EXPECT_TRUE(comm.AllReduce(b, b, ReduceOp::kSum, call)->Wait().ok());
             EXPECT_EQ(data[0], 3.0f);
           },
           options, {"a", "b", "c"});
}

TEST(CompressedAllReduceMismatch, AnUnknownCodecIsAClearError) {
  RunGroup(2, [&](int, Communicator& comm) {
    std::vector<float> data(10, 1.0f);
    CallOptions call;
    call.algo = "butterfly";
    call.codec_intra = "zip";
    Buffer b{data.data(), data.size(), DType::kF32};
    absl::Status s = comm.AllReduce(b, b, ReduceOp::kSum, call)->Wait();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "unknown codec 'zip'")) << s;
  });
}

}  // namespace
}  // namespace hmc
