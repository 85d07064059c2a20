// Two 8-bit codecs over a whole span, as Hivemind's Uniform8BitQuantization and
// Quantile8BitQuantization: uniform spreads 256 levels evenly between the minimum and the maximum;
// quantile puts the 256 bucket boundaries at quantiles of the values (so each level carries about
// the same number of values) and sends each bucket's mean as its level.
#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"
#include "collectives/codecs/codec_factories.h"

namespace hmc {
namespace {

constexpr int kLevels = 256;

// Maps a finite float to an integer with the same order, so min and max reduce as integers
// (which vectorizes; float min/max do not without -ffast-math).
int32_t Ordered(float x) {
  const int32_t bits = std::bit_cast<int32_t>(x);
  return bits >= 0 ? bits : static_cast<int32_t>(0x80000000u - static_cast<uint32_t>(bits));
}
float FromOrdered(int32_t o) {
  return std::bit_cast<float>(
      o >= 0 ? o : static_cast<int32_t>(0x80000000u - static_cast<uint32_t>(o)));
}

class Uniform8Codec final : public Codec {
 public:
  std::string name() const override { return "uniform8"; }

 protected:
  size_t MaxPayloadBytes(size_t count) const override { return 2 * sizeof(float) + count; }
  size_t EncodeFinite(const float* in, size_t count, uint8_t* out, CodecState*) const override {
    int32_t lo = Ordered(count > 0 ? in[0] : 0.0f), hi = lo;
    for (size_t i = 0; i < count; ++i) {
      lo = std::min(lo, Ordered(in[i]));
      hi = std::max(hi, Ordered(in[i]));
    }
    const float low = FromOrdered(lo), high = FromOrdered(hi);
    const float scale = high > low ? (kLevels - 1) / (high - low) : 0.0f;
    std::memcpy(out, &low, sizeof(float));
    std::memcpy(out + sizeof(float), &high, sizeof(float));
    uint8_t* q = out + 2 * sizeof(float);
    for (size_t i = 0; i < count; ++i) {
      q[i] = static_cast<uint8_t>(std::min(255, static_cast<int>((in[i] - low) * scale + 0.5f)));
    }
    return MaxPayloadBytes(count);
  }
  absl::Status DecodeFinite(const uint8_t* in, size_t bytes, float* out,
                            size_t count) const override {
    if (bytes != MaxPayloadBytes(count)) return LengthError(bytes, count);
    float low, high;
    std::memcpy(&low, in, sizeof(float));
    std::memcpy(&high, in + sizeof(float), sizeof(float));
    const float step = (high - low) / (kLevels - 1);
    const uint8_t* q = in + 2 * sizeof(float);
    for (size_t i = 0; i < count; ++i) out[i] = low + q[i] * step;
    return absl::OkStatus();
  }
};

class Quantile8Codec final : public Codec {
 public:
  std::string name() const override { return "quantile8"; }

 protected:
  size_t MaxPayloadBytes(size_t count) const override { return kLevels * sizeof(float) + count; }
  size_t EncodeFinite(const float* in, size_t count, uint8_t* out, CodecState*) const override {
    // Boundaries from a strided sample: quantiles of 64 Ki values are as good as of all of them.
    constexpr size_t kSample = 1 << 16;
    const size_t stride = std::max<size_t>(1, count / kSample);
    std::vector<float> sample;
    for (size_t i = 0; i < count; i += stride) sample.push_back(in[i]);
    std::sort(sample.begin(), sample.end());
    float boundaries[kLevels - 1];
    for (int k = 1; k < kLevels; ++k) {
      boundaries[k - 1] = sample.empty() ? 0.0f : sample[k * sample.size() / kLevels];
    }
    // A value's bucket is how many boundaries are <= it. A table over evenly spaced cells of
    // [first boundary, last boundary] gives a bucket near the answer in one lookup, and a step or
    // two along the boundaries finishes (a binary search per value is several times slower).
    constexpr int kCells = 4096;
    const float lo = boundaries[0], hi = boundaries[kLevels - 2];
    const float cells_per_unit = hi > lo ? kCells / (hi - lo) : 0.0f;
    uint8_t start_bucket[kCells + 1];
    for (int c = 0; c <= kCells; ++c) {
      const float start = cells_per_unit > 0 ? lo + c / cells_per_unit : lo;
      start_bucket[c] = static_cast<uint8_t>(std::min<ptrdiff_t>(
          kLevels - 2,
          std::upper_bound(boundaries, boundaries + (kLevels - 1), start) - boundaries));
    }
    uint8_t* q = out + kLevels * sizeof(float);
    double sums[kLevels] = {};
    size_t counts[kLevels] = {};
    for (size_t i = 0; i < count; ++i) {
      const float x = in[i];
      const float cell = std::clamp((x - lo) * cells_per_unit, 0.0f, static_cast<float>(kCells));
      int bucket = start_bucket[static_cast<int>(cell)];
      while (bucket > 0 && boundaries[bucket - 1] > x) --bucket;
      while (bucket < kLevels - 1 && boundaries[bucket] <= x) ++bucket;
      q[i] = static_cast<uint8_t>(bucket);
      sums[bucket] += x;
      ++counts[bucket];
    }
    for (int k = 0; k < kLevels; ++k) {
      // An empty bucket's level is never used; its lower boundary keeps the table monotonic.
      const float level = counts[k] > 0 ? static_cast<float>(sums[k] / counts[k])
                                        : (k == 0 ? boundaries[0] : boundaries[k - 1]);
      std::memcpy(out + k * sizeof(float), &level, sizeof(float));
    }
    return MaxPayloadBytes(count);
  }
  absl::Status DecodeFinite(const uint8_t* in, size_t bytes, float* out,
                            size_t count) const override {
    if (bytes != MaxPayloadBytes(count)) return LengthError(bytes, count);
    float levels[kLevels];
    std::memcpy(levels, in, sizeof(levels));
    const uint8_t* q = in + sizeof(levels);
    for (size_t i = 0; i < count; ++i) out[i] = levels[q[i]];
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Codec> MakeUniform8Codec() { return std::make_unique<Uniform8Codec>(); }
std::unique_ptr<Codec> MakeQuantile8Codec() { return std::make_unique<Quantile8Codec>(); }

}  // namespace hmc
