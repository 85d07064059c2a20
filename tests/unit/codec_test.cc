// Codecs: round-trip error bounds, non-finite values, malformed encodings, and error feedback.
#include "collectives/codecs/codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "absl/strings/match.h"

namespace hmc {
namespace {

std::unique_ptr<Codec> Make(const std::string& spec) {
  auto codec = MakeCodec(spec);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return std::move(*codec);
}

std::vector<float> Gaussian(size_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> RoundTrip(const Codec& codec, const std::vector<float>& in,
                             CodecState* state = nullptr) {
  std::vector<uint8_t> wire(codec.MaxEncodedBytes(in.size()));
  const size_t bytes = codec.Encode(in.data(), in.size(), wire.data(), state);
  EXPECT_LE(bytes, wire.size());
  std::vector<float> out(in.size(), -1.0f);
  EXPECT_TRUE(codec.Decode(wire.data(), bytes, out.data(), out.size()).ok());
  return out;
}

double RelativeL2(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(a[i]) * a[i];
  }
  return std::sqrt(diff / norm);
}

TEST(Codec, NoneIsExact) {
  const std::vector<float> in = Gaussian(1001, 3, 1);
  EXPECT_EQ(RoundTrip(*Make("none"), in), in);
}

TEST(Codec, Fp16RelativeErrorWithinItsRange) {
  // Log-uniform magnitudes across fp16's normal range, both signs.
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> exponent(-14.0f, 15.9f);
  std::vector<float> in(100003);
  for (size_t i = 0; i < in.size(); ++i) in[i] = (i % 2 ? -1 : 1) * std::exp2(exponent(rng));
  const std::vector<float> out = RoundTrip(*Make("fp16"), in);
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_LE(std::fabs(out[i] - in[i]), std::ldexp(std::fabs(in[i]), -11)) << in[i];
  }
  // Beyond the largest half (65504) values overflow to infinity, as IEEE rounding does.
  EXPECT_TRUE(std::isinf(RoundTrip(*Make("fp16"), {1e6f})[0]));
}

TEST(Codec, Bf16RelativeError) {
  const std::vector<float> in = Gaussian(10007, 1e3, 3);
  const std::vector<float> out = RoundTrip(*Make("bf16"), in);
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_LE(std::fabs(out[i] - in[i]), std::ldexp(std::fabs(in[i]), -8)) << in[i];
  }
}

TEST(Codec, Int8ErrorAtMostHalfAStepOfItsBlock) {
  // Blocks of very different scales side by side.
  std::vector<float> in = Gaussian(64 * 100 + 17, 1, 4);
  for (size_t i = 0; i < in.size(); ++i) in[i] *= std::pow(10.0f, float(i / 64 % 7) - 3);
  const std::vector<float> out = RoundTrip(*Make("int8:block=64"), in);
  for (size_t begin = 0; begin < in.size(); begin += 64) {
    float absmax = 0;
    for (size_t i = begin; i < std::min(in.size(), begin + 64); ++i) {
      absmax = std::max(absmax, std::fabs(in[i]));
    }
    const float half_step = absmax / 127 / 2;
    for (size_t i = begin; i < std::min(in.size(), begin + 64); ++i) {
      ASSERT_LE(std::fabs(out[i] - in[i]), half_step * 1.0001f) << i;
    }
  }
}

TEST(Codec, UniformAndQuantileEightBit) {
  const std::vector<float> in = Gaussian(50000, 2, 5);
  const std::vector<float> uniform = RoundTrip(*Make("uniform8"), in);
  const auto [lo, hi] = std::minmax_element(in.begin(), in.end());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_LE(std::fabs(uniform[i] - in[i]), (*hi - *lo) / 255 / 2 * 1.0001f) << i;
  }
  // Quantile levels follow the distribution: dense where values are, so the bulk of a Gaussian
  // (within one sigma) is kept several times more precisely than with evenly spread levels, at
  // the price of coarse levels in the sparse tails.
  const std::vector<float> quantile = RoundTrip(*Make("quantile8"), in);
  double bulk_quantile = 0, bulk_uniform = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::fabs(in[i]) < 2) {
      bulk_quantile += std::fabs(quantile[i] - in[i]);
      bulk_uniform += std::fabs(uniform[i] - in[i]);
    }
  }
  EXPECT_LT(bulk_quantile * 2, bulk_uniform);
  EXPECT_LT(RelativeL2(in, quantile), 0.05);
  // Each level carries about 1/256 of the values.
  std::map<float, size_t> per_level;
  for (float x : quantile) ++per_level[x];
  EXPECT_EQ(per_level.size(), 256u);
  for (const auto& [level, n] : per_level) EXPECT_NEAR(n, in.size() / 256.0, 60) << level;
}

TEST(Codec, TopKKeepsTheLargestMagnitudes) {
  std::vector<float> in = Gaussian(1000, 1, 6);
  const std::vector<float> out = RoundTrip(*Make("topk:ratio=0.05"), in);
  std::vector<float> magnitudes;
  for (float x : in) magnitudes.push_back(std::fabs(x));
  std::sort(magnitudes.rbegin(), magnitudes.rend());
  const float threshold = magnitudes[49];
  size_t kept = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (out[i] != 0) {
      ++kept;
      EXPECT_EQ(out[i], in[i]);
      EXPECT_GE(std::fabs(in[i]), threshold);
    }
  }
  EXPECT_EQ(kept, 50u);
}

TEST(Codec, PowerSgdRecoversALowRankMatrix) {
  // A 40 × 40 matrix of rank 2 (the codec views 1600 values as 40 × 40).
  const std::vector<float> u = Gaussian(80, 1, 7), v = Gaussian(80, 1, 8);
  std::vector<float> in(1600);
  for (size_t i = 0; i < 40; ++i) {
    for (size_t j = 0; j < 40; ++j) {
      in[i * 40 + j] = u[i] * v[j] + u[40 + i] * v[40 + j];
    }
  }
  // One power iteration from a random start is not exact; a warm-started second one is.
  const auto codec = Make("powersgd:rank=2");
  CodecState state;
  std::vector<uint8_t> wire(codec->MaxEncodedBytes(in.size()));
  codec->Encode(in.data(), in.size(), wire.data(), &state);
  state.residual.clear();  // Only the warm start is carried here, not error feedback.
  std::vector<float> out(in.size());
  const size_t bytes = codec->Encode(in.data(), in.size(), wire.data(), &state);
  ASSERT_TRUE(codec->Decode(wire.data(), bytes, out.data(), out.size()).ok());
  EXPECT_LT(RelativeL2(in, out), 1e-4);
  EXPECT_EQ(bytes, 1 + (40 + 40) * 2 * sizeof(float));
}

TEST(Codec, NonFiniteValuesTravelExactly) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::string& spec : DefaultCodecSpecs()) {
    std::vector<float> in = Gaussian(300, 1, 9);
    in[3] = nan;
    in[100] = inf;
    in[200] = -inf;
    const std::vector<float> out = RoundTrip(*Make(spec), in);
    EXPECT_TRUE(std::isnan(out[3])) << spec;
    EXPECT_EQ(out[100], inf) << spec;
    EXPECT_EQ(out[200], -inf) << spec;
    EXPECT_EQ(out[0], in[0]) << spec;  // The span went uncompressed.
  }
}

TEST(Codec, MalformedEncodingsAreRejected) {
  for (const std::string& spec : DefaultCodecSpecs()) {
    const auto codec = Make(spec);
    const std::vector<float> in = Gaussian(1000, 1, 10);
    std::vector<uint8_t> wire(codec->MaxEncodedBytes(in.size()));
    const size_t bytes = codec->Encode(in.data(), in.size(), wire.data());
    std::vector<float> out(in.size());
    EXPECT_FALSE(codec->Decode(wire.data(), bytes - 1, out.data(), out.size()).ok()) << spec;
    EXPECT_FALSE(codec->Decode(wire.data(), 0, out.data(), out.size()).ok()) << spec;
    wire[0] = 7;  // No such kind.
    EXPECT_FALSE(codec->Decode(wire.data(), bytes, out.data(), out.size()).ok()) << spec;
  }
  // Top-k indices out of order are someone else's bytes.
  const auto topk = Make("topk:ratio=0.5");
  const std::vector<float> in = {1, 2, 3, 4};
  std::vector<uint8_t> wire(topk->MaxEncodedBytes(4));
  const size_t bytes = topk->Encode(in.data(), 4, wire.data());
  std::swap_ranges(wire.begin() + 1, wire.begin() + 9, wire.begin() + 9);
  std::vector<float> out(4);
  EXPECT_FALSE(topk->Decode(wire.data(), bytes, out.data(), 4).ok());
}

TEST(Codec, ErrorFeedbackMakesTheSentSumConvergeToTheInputSum) {
  for (const char* spec :
       {"int8:block=256", "uniform8", "quantile8", "topk:ratio=0.01", "powersgd:rank=1", "fp16"}) {
    const auto codec = Make(spec);
    CodecState state;
    std::vector<double> sent(4096, 0), inputs(4096, 0);
    double last_gap = 0;
    for (int step = 0; step < 200; ++step) {
      const std::vector<float> g = Gaussian(4096, 1, 100 + step);
      const std::vector<float> out = RoundTrip(*codec, g, &state);
      for (size_t i = 0; i < g.size(); ++i) {
        sent[i] += out[i];
        inputs[i] += g[i];
      }
      // The sums differ by exactly the residual still held back, which stays bounded.
      double gap = 0;
      for (size_t i = 0; i < g.size(); ++i) gap = std::max(gap, std::fabs(inputs[i] - sent[i]));
      last_gap = gap;
    }
    double norm = 0;
    for (double x : inputs) norm = std::max(norm, std::fabs(x));
    // Averaged over the steps, what was sent matches the inputs ever more closely.
    EXPECT_LT(last_gap / 200, 0.05 * norm / std::sqrt(200.0)) << spec;
    double residual = 0;
    for (size_t i = 0; i < sent.size(); ++i) {
      residual = std::max(residual, std::fabs(inputs[i] - sent[i] - state.residual[i]));
    }
    EXPECT_LT(residual, 1e-3) << spec;
  }
}

TEST(Codec, BadSpecsNameWhatIsWrong) {
  EXPECT_TRUE(absl::StrContains(MakeCodec("zip").status().message(), "unknown codec"));
  EXPECT_TRUE(absl::StrContains(MakeCodec("int8:block=0").status().message(), "block=0"));
  EXPECT_TRUE(absl::StrContains(MakeCodec("topk:k=3").status().message(), "unknown parameter"));
  EXPECT_TRUE(absl::StrContains(MakeCodec("fp16:x").status().message(), "NAME=VALUE"));
}

}  // namespace
}  // namespace hmc
