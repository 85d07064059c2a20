// The pattern that every collective test fills and checks: its period holds for every dtype and
// op, and the periodic check still finds a single wrong element anywhere in a long buffer.
#include "perf/check_pattern.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/typed_values.h"

namespace hmc {
namespace {

TEST(CheckPattern, EveryValueRepeatsAfterThePeriod) {
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (int rank : {0, 1, 5}) {
        for (size_t i = 0; i < kPatternPeriod; i += 7) {
          ASSERT_EQ(PatternValue(rank, i, dtype, op),
                    PatternValue(rank, i + 3 * kPatternPeriod, dtype, op))
              << DTypeName(dtype) << " " << ReduceOpName(op) << " rank " << rank << " at " << i;
        }
      }
    }
  }
}

TEST(CheckPattern, FillWritesEveryElementAsTheRanksValue) {
  const size_t count = 2 * kPatternPeriod + 333, offset = 41;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kU8}) {
    std::vector<uint8_t> data(count * DTypeSize(dtype));
    FillPattern(data.data(), count, dtype, 3, ReduceOp::kMax, offset);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(LoadAsDouble(data.data(), i, dtype),
                PatternValue(3, offset + i, dtype, ReduceOp::kMax))
          << DTypeName(dtype) << " at " << i;
    }
    EXPECT_EQ(CountPatternMismatches(data.data(), count, dtype, 3, ReduceOp::kMax, offset), 0u);
    // Another rank's values differ everywhere: by 29 (mod 101) for min and max.
    EXPECT_EQ(CountPatternMismatches(data.data(), count, dtype, 4, ReduceOp::kMax, offset), count)
        << DTypeName(dtype);
  }
}

TEST(CheckPattern, OneWrongElementIsFoundInEveryPeriodAndAtTheEnd) {
  const size_t count = 3 * kPatternPeriod + 17;
  const int ranks = 4;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) {
    data[i] = static_cast<float>(ReferenceReduction(ranks, i + 5, DType::kF32, ReduceOp::kSum));
  }
  EXPECT_EQ(CountReductionMismatches(data.data(), count, DType::kF32, ranks, ReduceOp::kSum, 5),
            0u);
  for (size_t wrong_at : {size_t{0}, kPatternPeriod + 9, 2 * kPatternPeriod, count - 1}) {
    std::vector<float> corrupt = data;
    corrupt[wrong_at] += 1;
    EXPECT_EQ(
        CountReductionMismatches(corrupt.data(), count, DType::kF32, ranks, ReduceOp::kSum, 5), 1u)
        << "wrong at " << wrong_at;
  }
  // 0 and -0 are the same value.
  const float minus_zero = -0.0f;
  EXPECT_EQ(CountReductionMismatches(&minus_zero, 1, DType::kF32, 1, ReduceOp::kSum), 0u);
}

}  // namespace
}  // namespace hmc
