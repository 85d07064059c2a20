// Top-k sparsification: the k = ceil(ratio · count) values of largest magnitude, sent as
// (index, value) pairs in index order; the rest decode as zero. Meant for error feedback, which
// carries what is left out into later steps.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_format.h"
#include "collectives/codecs/codec_factories.h"

namespace hmc {
namespace {

constexpr size_t kPairBytes = sizeof(uint32_t) + sizeof(float);

class TopKCodec final : public Codec {
 public:
  explicit TopKCodec(double ratio) : ratio_(ratio) {}
  std::string name() const override { return absl::StrFormat("topk:ratio=%g", ratio_); }

 protected:
  size_t Keep(size_t count) const {
    if (count == 0) return 0;
    return std::clamp<size_t>(static_cast<size_t>(std::ceil(ratio_ * count)), 1, count);
  }
  size_t MaxPayloadBytes(size_t count) const override { return Keep(count) * kPairBytes; }
  size_t EncodeFinite(const float* in, size_t count, uint8_t* out, CodecState*) const override {
    const size_t k = Keep(count);
    std::vector<uint32_t> index(count);
    std::iota(index.begin(), index.end(), 0u);
    auto larger = [in](uint32_t a, uint32_t b) { return std::fabs(in[a]) > std::fabs(in[b]); };
    std::nth_element(index.begin(), index.begin() + k, index.end(), larger);
    index.resize(k);
    std::sort(index.begin(), index.end());
    uint8_t* p = out;
    for (uint32_t i : index) {
      std::memcpy(p, &i, sizeof(i));
      std::memcpy(p + sizeof(i), in + i, sizeof(float));
      p += kPairBytes;
    }
    return k * kPairBytes;
  }
  absl::Status DecodeFinite(const uint8_t* in, size_t bytes, float* out,
                            size_t count) const override {
    if (bytes != MaxPayloadBytes(count)) {
      return LengthError(bytes, count);
    }
    std::fill(out, out + count, 0.0f);
    int64_t previous = -1;
    for (const uint8_t* p = in; p < in + bytes; p += kPairBytes) {
      uint32_t i;
      std::memcpy(&i, p, sizeof(i));
      // Indices rise strictly and stay inside the span, or the bytes are not this codec's.
      if (static_cast<int64_t>(i) <= previous || i >= count) {
        return absl::DataLossError(
            absl::StrFormat("%s: index %d out of order or beyond %d values", name(), i, count));
      }
      previous = i;
      std::memcpy(out + i, p + sizeof(i), sizeof(float));
    }
    return absl::OkStatus();
  }

 private:
  const double ratio_;
};

}  // namespace

std::unique_ptr<Codec> MakeTopKCodec(double ratio) { return std::make_unique<TopKCodec>(ratio); }

}  // namespace hmc
