#include "collectives/codecs/codec.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "collectives/codecs/codec_factories.h"

namespace hmc {
namespace {

enum Kind : uint8_t { kCoded = 0, kRaw = 1 };

// Branch-free so that it vectorizes: an exponent of all ones is NaN or ±Inf.
bool AllFinite(const float* values, size_t count) {
  uint32_t non_finite = 0;
  for (size_t i = 0; i < count; ++i) {
    non_finite |= (std::bit_cast<uint32_t>(values[i]) & 0x7f800000u) == 0x7f800000u;
  }
  return non_finite == 0;
}

}  // namespace

size_t Codec::MaxEncodedBytes(size_t count) const {
  return 1 + std::max(count * sizeof(float), MaxPayloadBytes(count));
}

size_t Codec::Encode(const float* in, size_t count, uint8_t* out, CodecState* state) const {
  const bool feedback = state != nullptr && !lossless();
  std::vector<float> corrected;
  const float* values = in;
  if (feedback) {
    if (state->residual.size() != count) state->residual.assign(count, 0.0f);
    corrected.resize(count);
    for (size_t i = 0; i < count; ++i) corrected[i] = in[i] + state->residual[i];
    values = corrected.data();
  }
  if (!AllFinite(values, count)) {
    out[0] = kRaw;
    std::memcpy(out + 1, values, count * sizeof(float));
    if (feedback) std::fill(state->residual.begin(), state->residual.end(), 0.0f);
    return 1 + count * sizeof(float);
  }
  out[0] = kCoded;
  const size_t bytes = 1 + EncodeFinite(values, count, out + 1, state);
  if (feedback) {
    std::vector<float> decoded(count);
    // Decoding what this process just encoded cannot fail.
    DecodeFinite(out + 1, bytes - 1, decoded.data(), count).IgnoreError();
    for (size_t i = 0; i < count; ++i) state->residual[i] = values[i] - decoded[i];
  }
  return bytes;
}

absl::Status Codec::LengthError(size_t bytes, size_t count) const {
  return absl::DataLossError(
      absl::StrFormat("%s: %d bytes cannot hold %d values", name(), bytes, count));
}

absl::Status Codec::Decode(const uint8_t* in, size_t bytes, float* out, size_t count) const {
  if (bytes == 0) return absl::DataLossError(name() + ": empty encoding");
  if (in[0] == kRaw) {
    if (bytes != 1 + count * sizeof(float)) {
      return absl::DataLossError(name() + ": raw encoding of the wrong length");
    }
    std::memcpy(out, in + 1, count * sizeof(float));
    return absl::OkStatus();
  }
  if (in[0] != kCoded) return absl::DataLossError(name() + ": unknown encoding kind");
  return DecodeFinite(in + 1, bytes - 1, out, count);
}

absl::StatusOr<std::unique_ptr<Codec>> MakeCodec(absl::string_view spec) {
  const std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 1));
  const std::string& kind = parts[0];
  std::map<std::string, std::string> params;
  if (parts.size() == 2) {
    for (absl::string_view item : absl::StrSplit(parts[1], ',')) {
      const std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
      if (kv.size() != 2) {
        return absl::InvalidArgumentError(
            absl::StrFormat("codec '%s': parameter '%s' is not NAME=VALUE", spec, item));
      }
      params[kv[0]] = kv[1];
    }
  }
  // Takes parameter `key` (or its default) and checks it lies in [low, high].
  auto number = [&](const std::string& key, double fallback, double low,
                    double high) -> absl::StatusOr<double> {
    auto it = params.find(key);
    if (it == params.end()) return fallback;
    double value;
    if (!absl::SimpleAtod(it->second, &value) || value < low || value > high) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "codec '%s': %s=%s is not a number in [%g, %g]", spec, key, it->second, low, high));
    }
    params.erase(it);
    return value;
  };
  std::unique_ptr<Codec> codec;
  if (kind == "none") {
    codec = MakeNoneCodec();
  } else if (kind == "fp16") {
    codec = MakeFp16Codec();
  } else if (kind == "bf16") {
    codec = MakeBf16Codec();
  } else if (kind == "int8") {
    absl::StatusOr<double> block = number("block", 256, 1, 1 << 20);
    if (!block.ok()) return block.status();
    codec = MakeInt8BlockCodec(static_cast<size_t>(*block));
  } else if (kind == "uniform8") {
    codec = MakeUniform8Codec();
  } else if (kind == "quantile8") {
    codec = MakeQuantile8Codec();
  } else if (kind == "topk") {
    absl::StatusOr<double> ratio = number("ratio", 0.01, 1e-6, 1);
    if (!ratio.ok()) return ratio.status();
    codec = MakeTopKCodec(*ratio);
  } else if (kind == "powersgd") {
    absl::StatusOr<double> rank = number("rank", 4, 1, 1024);
    if (!rank.ok()) return rank.status();
    codec = MakePowerSgdCodec(static_cast<int>(*rank));
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown codec '%s' (none, fp16, bf16, int8[:block=N], uniform8, quantile8, "
        "topk[:ratio=R], powersgd[:rank=R])",
        spec));
  }
  if (!params.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("codec '%s': unknown parameter '%s'", spec, params.begin()->first));
  }
  return codec;
}

std::vector<std::string> DefaultCodecSpecs() {
  return {"none",
          "fp16",
          "bf16",
          "int8:block=256",
          "uniform8",
          "quantile8",
          "topk:ratio=0.01",
          "powersgd:rank=4"};
}

}  // namespace hmc
