#include "collectives/host_reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/typed_values.h"

namespace hmc {
namespace {

TEST(HostReduce, EveryOpOnEveryAccumulatorType) {
  struct Case {
    ReduceOp op;
    double a, b, expected;
  };
  const Case cases[] = {{ReduceOp::kSum, 3, 4, 7},
                        {ReduceOp::kAvg, 3, 4, 7},
                        {ReduceOp::kProd, 3, 4, 12},
                        {ReduceOp::kMin, 3, 4, 3},
                        {ReduceOp::kMax, 3, 4, 4}};
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8}) {
    for (const Case& c : cases) {
      std::vector<uint8_t> a(8 * 33), b(8 * 33);
      for (size_t i = 0; i < 33; ++i) {
        StoreFromDouble(a.data(), i, dtype, c.a);
        StoreFromDouble(b.data(), i, dtype, c.b);
      }
      ReduceHost(a.data(), a.data(), b.data(), 33, dtype, c.op);
      for (size_t i = 0; i < 33; ++i) {
        EXPECT_EQ(LoadAsDouble(a.data(), i, dtype), c.expected)
            << DTypeName(dtype) << " " << ReduceOpName(c.op);
      }
    }
  }
}

TEST(HostReduce, IntegerSumsWrapInsteadOfOverflowing) {
  int32_t a = 2147483647, b = 1, out = 0;
  ReduceHost(&out, &a, &b, 1, DType::kI32, ReduceOp::kSum);
  EXPECT_EQ(out, -2147483647 - 1);
  uint8_t x = 200, y = 100, z = 0;
  ReduceHost(&z, &x, &y, 1, DType::kU8, ReduceOp::kSum);
  EXPECT_EQ(z, 44);
}

TEST(HostReduce, FinalizeAveragesAndConverts) {
  float acc[3] = {9.0f, -9.0f, 1.0f};
  uint16_t half[3];
  FinalizeReduction(half, acc, 3, DType::kF16, ReduceOp::kAvg, 3);
  EXPECT_EQ(HalfToFloat(half[0]), 3.0f);
  EXPECT_EQ(HalfToFloat(half[1]), -3.0f);
  EXPECT_EQ(half[2], FloatToHalf(1.0f / 3.0f));
  int32_t ints[2] = {7, -7};
  FinalizeReduction(ints, ints, 2, DType::kI32, ReduceOp::kAvg, 2);
  EXPECT_EQ(ints[0], 3);
  EXPECT_EQ(ints[1], -3);  // Truncation toward zero.
}

// Accumulating f16 in f32 and rounding once is more accurate than rounding after every add.
TEST(HostReduce, HalfAccumulatesInFloat) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  constexpr int kRanks = 16;
  constexpr size_t kCount = 4096;
  std::vector<std::vector<uint16_t>> inputs(kRanks, std::vector<uint16_t>(kCount));
  for (auto& v : inputs) {
    for (auto& x : v) x = FloatToHalf(dist(rng));
  }
  std::vector<float> acc(kCount), next(kCount);
  ToAccumulator(acc.data(), inputs[0].data(), kCount, DType::kF16);
  for (int r = 1; r < kRanks; ++r) {
    ToAccumulator(next.data(), inputs[r].data(), kCount, DType::kF16);
    ReduceHost(acc.data(), acc.data(), next.data(), kCount, DType::kF32, ReduceOp::kSum);
  }
  std::vector<uint16_t> out(kCount);
  FinalizeReduction(out.data(), acc.data(), kCount, DType::kF16, ReduceOp::kSum, kRanks);
  for (size_t i = 0; i < kCount; ++i) {
    double exact = 0;
    for (int r = 0; r < kRanks; ++r) exact += HalfToFloat(inputs[r][i]);
    // One rounding to f16 (half an ulp) plus f32 error, far below an ulp of f16.
    const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(exact), 6.1e-5)) - 10);
    EXPECT_LE(std::fabs(HalfToFloat(out[i]) - exact), 0.5 * ulp + 1e-6) << i;
  }
}

}  // namespace
}  // namespace hmc
