// PowerSGD (Vogels et al., 2019): the span, seen as a rows × cols matrix M (cols = ceil(sqrt n),
// zero-padded), is sent as two thin factors of rank r from one step of power iteration:
// P = M Q, P orthonormalized (Gram-Schmidt), Q = Mᵀ P; the receiver takes P Qᵀ. Q is kept in the
// caller's state and starts the next step (warm start), which is what makes one iteration enough
// over training; error feedback carries what the low rank leaves out. Without a state Q starts
// from a fixed pseudo-random matrix, so every rank computes the same result from the same input.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "collectives/codecs/codec_factories.h"

namespace hmc {
namespace {

struct Shape {
  size_t rows, cols, rank;
};

class PowerSgdCodec final : public Codec {
 public:
  explicit PowerSgdCodec(int rank) : rank_(rank) {}
  std::string name() const override { return absl::StrFormat("powersgd:rank=%d", rank_); }

 protected:
  Shape ShapeOf(size_t count) const {
    const size_t cols = std::max<size_t>(1, static_cast<size_t>(std::ceil(std::sqrt(count))));
    const size_t rows = (count + cols - 1) / cols;
    return {rows, cols, std::min<size_t>({static_cast<size_t>(rank_), rows, cols})};
  }
  size_t MaxPayloadBytes(size_t count) const override {
    const Shape s = ShapeOf(count);
    return (s.rows + s.cols) * s.rank * sizeof(float);
  }

  size_t EncodeFinite(const float* in, size_t count, uint8_t* out,
                      CodecState* state) const override {
    const Shape s = ShapeOf(count);
    if (count == 0) return 0;
    auto m = [&](size_t i, size_t j) { return i * s.cols + j < count ? in[i * s.cols + j] : 0.0f; };
    std::vector<float> q(s.cols * s.rank);  // Column-major factors: q[k * cols + j].
    if (state != nullptr && state->warm.size() == q.size()) {
      q = state->warm;
    } else {
      uint32_t x = 2463534242u;  // xorshift32: the same start on every rank.
      for (float& v : q) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v = static_cast<float>(x) / 4294967296.0f - 0.5f;
      }
    }
    std::vector<float> p(s.rows * s.rank, 0.0f);  // p[k * rows + i]
    for (size_t i = 0; i < s.rows; ++i) {
      for (size_t j = 0; j < s.cols; ++j) {
        const float v = m(i, j);
        for (size_t k = 0; k < s.rank; ++k) p[k * s.rows + i] += v * q[k * s.cols + j];
      }
    }
    Orthonormalize(p, s.rows, s.rank);
    std::fill(q.begin(), q.end(), 0.0f);
    for (size_t i = 0; i < s.rows; ++i) {
      for (size_t j = 0; j < s.cols; ++j) {
        const float v = m(i, j);
        for (size_t k = 0; k < s.rank; ++k) q[k * s.cols + j] += v * p[k * s.rows + i];
      }
    }
    if (state != nullptr) state->warm = q;
    std::memcpy(out, p.data(), p.size() * sizeof(float));
    std::memcpy(out + p.size() * sizeof(float), q.data(), q.size() * sizeof(float));
    return (p.size() + q.size()) * sizeof(float);
  }

  absl::Status DecodeFinite(const uint8_t* in, size_t bytes, float* out,
                            size_t count) const override {
    if (bytes != MaxPayloadBytes(count)) {
      return LengthError(bytes, count);
    }
    const Shape s = ShapeOf(count);
    std::vector<float> p(s.rows * s.rank), q(s.cols * s.rank);
    std::memcpy(p.data(), in, p.size() * sizeof(float));
    std::memcpy(q.data(), in + p.size() * sizeof(float), q.size() * sizeof(float));
    for (size_t idx = 0; idx < count; ++idx) {
      const size_t i = idx / s.cols, j = idx % s.cols;
      float v = 0;
      for (size_t k = 0; k < s.rank; ++k) v += p[k * s.rows + i] * q[k * s.cols + j];
      out[idx] = v;
    }
    return absl::OkStatus();
  }

 private:
  // Modified Gram-Schmidt on the columns of a rows × rank column-major matrix; a column that
  // vanishes stays zero.
  static void Orthonormalize(std::vector<float>& a, size_t rows, size_t rank) {
    for (size_t k = 0; k < rank; ++k) {
      float* col = a.data() + k * rows;
      for (size_t prev = 0; prev < k; ++prev) {
        const float* other = a.data() + prev * rows;
        double dot = 0;
        for (size_t i = 0; i < rows; ++i) dot += static_cast<double>(col[i]) * other[i];
        for (size_t i = 0; i < rows; ++i) col[i] -= static_cast<float>(dot) * other[i];
      }
      double norm = 0;
      for (size_t i = 0; i < rows; ++i) norm += static_cast<double>(col[i]) * col[i];
      const float inverse = norm > 1e-30 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
      for (size_t i = 0; i < rows; ++i) col[i] *= inverse;
    }
  }

  const int rank_;
};

}  // namespace

std::unique_ptr<Codec> MakePowerSgdCodec(int rank) { return std::make_unique<PowerSgdCodec>(rank); }

}  // namespace hmc
