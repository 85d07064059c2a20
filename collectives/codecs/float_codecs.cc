// none, fp16 and bf16: one f32 value to 4, 2 and 2 bytes, rounding to nearest even.
#include <cpuid.h>
#include <immintrin.h>

#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"
#include "collectives/codecs/codec_factories.h"
#include "core/half.h"

namespace hmc {
namespace {

// F16C converts eight values per instruction; it is chosen at run time so that the build still
// runs on x86-64 machines without it (the scalar loop serves those and other architectures).
// Wire bytes need not be aligned for uint16_t, so every 16-bit value goes through memcpy.
__attribute__((target("avx,f16c"))) void FloatsToHalfF16c(const float* in, size_t count,
                                                          uint8_t* out) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  for (; i < count; ++i) {
    const uint16_t h = FloatToHalf(in[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

__attribute__((target("avx,f16c"))) void HalfToFloatsF16c(const uint8_t* in, size_t count,
                                                          float* out) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = HalfToFloat(h);
  }
}

bool HaveF16c() {
  // CPUID leaf 1: ECX bit 29 is F16C (clang 14's __builtin_cpu_supports does not know "f16c").
  static const bool have = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0 &&
           __builtin_cpu_supports("avx");
  }();
  return have;
}

class NoneCodec final : public Codec {
 public:
  std::string name() const override { return "none"; }
  bool lossless() const override { return true; }

 protected:
  size_t MaxPayloadBytes(size_t count) const override { return count * sizeof(float); }
  size_t EncodeFinite(const float* in, size_t count, uint8_t* out, CodecState*) const override {
    std::memcpy(out, in, count * sizeof(float));
    return count * sizeof(float);
  }
  absl::Status DecodeFinite(const uint8_t* in, size_t bytes, float* out,
                            size_t count) const override {
    if (bytes != count * sizeof(float)) return LengthError(bytes, count);
    std::memcpy(out, in, bytes);
    return absl::OkStatus();
  }
};

// fp16 and bf16 differ only in the conversion.
class HalfWidthCodec final : public Codec {
 public:
  explicit HalfWidthCodec(bool brain) : brain_(brain) {}
  std::string name() const override { return brain_ ? "bf16" : "fp16"; }

 protected:
  size_t MaxPayloadBytes(size_t count) const override { return count * 2; }
  size_t EncodeFinite(const float* in, size_t count, uint8_t* out, CodecState*) const override {
    if (brain_) {
      // Finite values only, so rounding to nearest even is one add and a shift (vectorizes).
      for (size_t i = 0; i < count; ++i) {
        const uint32_t f = std::bit_cast<uint32_t>(in[i]);
        const uint16_t h = static_cast<uint16_t>((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
        std::memcpy(out + 2 * i, &h, 2);
      }
    } else if (HaveF16c()) {
      FloatsToHalfF16c(in, count, out);
    } else {
      for (size_t i = 0; i < count; ++i) {
        const uint16_t h = FloatToHalf(in[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
    }
    return count * 2;
  }
  absl::Status DecodeFinite(const uint8_t* in, size_t bytes, float* out,
                            size_t count) const override {
    if (bytes != count * 2) {
      return LengthError(bytes, count);
    }
    if (!brain_ && HaveF16c()) {
      HalfToFloatsF16c(in, count, out);
      return absl::OkStatus();
    }
    for (size_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, in + 2 * i, 2);
      out[i] = brain_ ? std::bit_cast<float>(static_cast<uint32_t>(h) << 16) : HalfToFloat(h);
    }
    return absl::OkStatus();
  }

 private:
  const bool brain_;
};

}  // namespace

std::unique_ptr<Codec> MakeNoneCodec() { return std::make_unique<NoneCodec>(); }
std::unique_ptr<Codec> MakeFp16Codec() { return std::make_unique<HalfWidthCodec>(false); }
std::unique_ptr<Codec> MakeBf16Codec() { return std::make_unique<HalfWidthCodec>(true); }

}  // namespace hmc
