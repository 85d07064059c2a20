// Blockwise int8: each block of `block` values is sent as its absmax scale (f32) and one signed
// byte per value, q = round(x · 127 / absmax), so every value is off by at most half a step of its
// own block (absmax / 254): a block of small gradients keeps its precision next to a block of
// large ones.
#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"
#include "collectives/codecs/codec_factories.h"

namespace hmc {
namespace {

class Int8BlockCodec final : public Codec {
 public:
  explicit Int8BlockCodec(size_t block) : block_(block) {}
  std::string name() const override { return absl::StrFormat("int8:block=%d", block_); }

 protected:
  size_t Blocks(size_t count) const { return (count + block_ - 1) / block_; }
  size_t MaxPayloadBytes(size_t count) const override {
    return Blocks(count) * sizeof(float) + count;
  }

  size_t EncodeFinite(const float* in, size_t count, uint8_t* out, CodecState*) const override {
    uint8_t* p = out;
    for (size_t begin = 0; begin < count; begin += block_) {
      const size_t n = std::min(block_, count - begin);
      const float* x = in + begin;
      // For finite floats the magnitude orders like its bit pattern: an integer max vectorizes.
      uint32_t max_bits = 0;
      for (size_t i = 0; i < n; ++i) {
        max_bits = std::max(max_bits, std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu);
      }
      const float absmax = std::bit_cast<float>(max_bits);
      const float scale = absmax / 127.0f;
      const float inverse = absmax > 0 ? 127.0f / absmax : 0.0f;
      std::memcpy(p, &scale, sizeof(float));
      p += sizeof(float);
      for (size_t i = 0; i < n; ++i) {
        // Round half away from zero by truncating x·k ± 0.5 (vectorizes without SSE4.1).
        const float v = x[i] * inverse;
        const int q = static_cast<int>(v + (v >= 0 ? 0.5f : -0.5f));
        p[i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127, 127)));
      }
      p += n;
    }
    return static_cast<size_t>(p - out);
  }

  absl::Status DecodeFinite(const uint8_t* in, size_t bytes, float* out,
                            size_t count) const override {
    if (bytes != MaxPayloadBytes(count)) {
      return LengthError(bytes, count);
    }
    const uint8_t* p = in;
    for (size_t begin = 0; begin < count; begin += block_) {
      const size_t n = std::min(block_, count - begin);
      float scale;
      std::memcpy(&scale, p, sizeof(float));
      p += sizeof(float);
      for (size_t i = 0; i < n; ++i) out[begin + i] = static_cast<int8_t>(p[i]) * scale;
      p += n;
    }
    return absl::OkStatus();
  }

 private:
  const size_t block_;
};

}  // namespace

std::unique_ptr<Codec> MakeInt8BlockCodec(size_t block) {
  return std::make_unique<Int8BlockCodec>(block);
}

}  // namespace hmc
