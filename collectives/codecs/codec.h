#ifndef HMC_COLLECTIVES_CODECS_CODEC_H_
#define HMC_COLLECTIVES_CODECS_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hmc {

// What a lossy codec carries from one call to the next for one tensor (say, one gradient bucket).
// The caller owns it and passes the same state with the same tensor every step.
struct CodecState {
  std::vector<float> residual;  // Error feedback: what earlier encodings left out, sent later.
  std::vector<float> warm;      // PowerSGD: the previous Q factor, for a warm start.
};

// Encodes f32 values into bytes for the wire and back. Every encoding starts with one byte that
// says how the rest is coded: a span holding NaN or ±Inf travels uncompressed (raw f32), for
// every codec, so non-finite values arrive exactly and never poison a block's scale.
class Codec {
 public:
  virtual ~Codec() = default;
  // The spec it was made from, e.g. "int8:block=256".
  virtual std::string name() const = 0;
  virtual bool lossless() const { return false; }
  // An upper bound of Encode's output for `count` values.
  size_t MaxEncodedBytes(size_t count) const;
  // Encodes `count` values into `out` (MaxEncodedBytes(count) bytes) and returns the bytes used.
  // With a state (lossy codecs), encodes in + residual and keeps in + residual - decoded as the
  // new residual, so that what is lost now is sent in a later step (error feedback).
  size_t Encode(const float* in, size_t count, uint8_t* out, CodecState* state = nullptr) const;
  // Decodes `bytes` into `count` values; a length or header that does not fit is an error.
  absl::Status Decode(const uint8_t* in, size_t bytes, float* out, size_t count) const;

 protected:
  // The error for an encoding whose length does not fit `count` values.
  absl::Status LengthError(size_t bytes, size_t count) const;
  // The codec's own format, for finite values only.
  virtual size_t MaxPayloadBytes(size_t count) const = 0;
  virtual size_t EncodeFinite(const float* in, size_t count, uint8_t* out,
                              CodecState* state) const = 0;
  virtual absl::Status DecodeFinite(const uint8_t* in, size_t bytes, float* out,
                                    size_t count) const = 0;
};

// "none", "fp16", "bf16", "int8[:block=N]", "uniform8", "quantile8", "topk[:ratio=R]",
// "powersgd[:rank=R]"; an unknown name or parameter is an error that lists the valid ones.
absl::StatusOr<std::unique_ptr<Codec>> MakeCodec(absl::string_view spec);
// One spec per codec, with default parameters (for benchmarks and tests).
std::vector<std::string> DefaultCodecSpecs();

// Error-feedback state of one tensor's encodings, keyed by the first element of each encoded
// segment: this rank's contributions, and the results it owns (what one step's rounding of the
// average leaves out is added to the next step's). The caller keeps it from step to step (one
// per gradient bucket).
using CodecFeedback = std::map<size_t, CodecState>;

}  // namespace hmc

#endif  // HMC_COLLECTIVES_CODECS_CODEC_H_
