#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "core/reduce_op.h"

namespace hmc {
namespace {

TEST(DType, SizesNamesAndParsing) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_EQ(DTypeSize(DType::kU8), 1u);
  for (DType d : kAllDTypes) {
    auto parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(*ParseDType("bf16"), DType::kBF16);
  EXPECT_FALSE(ParseDType("float8").ok());
  EXPECT_EQ(AccumulatorType(DType::kF16), DType::kF32);
  EXPECT_EQ(AccumulatorType(DType::kBF16), DType::kF32);
  EXPECT_EQ(AccumulatorType(DType::kI32), DType::kI32);
  EXPECT_FALSE(IsValidDType(7));
}

TEST(ReduceOp, NamesRoundTrip) {
  for (ReduceOp op : kAllReduceOps) EXPECT_EQ(*ParseReduceOp(ReduceOpName(op)), op);
  EXPECT_FALSE(ParseReduceOp("xor").ok());
}

// Every finite half converts to float and back to the same bits; NaNs stay NaNs.
TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = HalfToFloat(static_cast<uint16_t>(bits));
    const uint16_t back = FloatToHalf(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(back))) << bits;
    } else {
      EXPECT_EQ(back, bits) << "bits " << bits << " value " << f;
    }
  }
}

TEST(Half, KnownValuesAndRounding) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // Rounds up to infinity.
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(5.960464477539063e-08f), 0x0001);  // Smallest subnormal.
  EXPECT_EQ(FloatToHalf(2.98e-08f), 0x0000);               // Below half of it: zero.
  // 1 + 2^-11 is halfway between 1 and the next half: ties to even (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3·2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9: ties to even (up).
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  // Relative error of a conversion in the normal range is at most 2^-11.
  for (float v = 1e-4f; v < 6e4f; v *= 1.37f) {
    EXPECT_LE(std::fabs(HalfToFloat(FloatToHalf(v)) - v) / v, std::ldexp(1.0, -11)) << v;
  }
}

TEST(BFloat16, RoundingAndSpecials) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is a tie between 1 and 1+2^-7: to even (1).
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(bits));
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBFloat16(f), bits);
    }
  }
}

}  // namespace
}  // namespace hmc
