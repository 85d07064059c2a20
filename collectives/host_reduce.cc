#include "collectives/host_reduce.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"

namespace hmc {
namespace {

// Integer sums and products wrap around (two's complement) instead of overflowing.
template <typename T, bool = std::is_integral_v<T>>
struct ArithOf {
  using type = T;
};
template <typename T>
struct ArithOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using Arith = typename ArithOf<T>::type;

struct Sum {
  template <typename T>
  static T Apply(T a, T b) {
    return static_cast<T>(static_cast<Arith<T>>(a) + static_cast<Arith<T>>(b));
  }
};
struct Prod {
  template <typename T>
  static T Apply(T a, T b) {
    return static_cast<T>(static_cast<Arith<T>>(a) * static_cast<Arith<T>>(b));
  }
};
struct Min {
  template <typename T>
  static T Apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <typename T>
  static T Apply(T a, T b) {
    return a < b ? b : a;
  }
};

template <typename T, typename Op>
void Loop(void* dst, const void* a, const void* b, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = Op::Apply(x[i], y[i]);
}

template <typename T>
void ReduceTyped(void* dst, const void* a, const void* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return Loop<T, Sum>(dst, a, b, n);
    case ReduceOp::kProd:
      return Loop<T, Prod>(dst, a, b, n);
    case ReduceOp::kMin:
      return Loop<T, Min>(dst, a, b, n);
    case ReduceOp::kMax:
      return Loop<T, Max>(dst, a, b, n);
  }
}

template <typename T>
void DivideTyped(void* dst, const void* src, size_t n, int divisor) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  const T div = static_cast<T>(divisor);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(s[i] / div);
}

}  // namespace

void ReduceHost(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kF32:
      return ReduceTyped<float>(dst, a, b, count, op);
    case DType::kF64:
      return ReduceTyped<double>(dst, a, b, count, op);
    case DType::kI32:
      return ReduceTyped<int32_t>(dst, a, b, count, op);
    case DType::kI64:
      return ReduceTyped<int64_t>(dst, a, b, count, op);
    case DType::kU8:
      return ReduceTyped<uint8_t>(dst, a, b, count, op);
    case DType::kF16:
    case DType::kBF16:
      break;  // Reduced as f32 accumulators; never reached.
  }
}

void ToAccumulator(void* dst, const void* src, size_t count, DType dtype) {
  float* out = static_cast<float*>(dst);
  const uint16_t* in = static_cast<const uint16_t*>(src);
  if (dtype == DType::kF16) {
    for (size_t i = 0; i < count; ++i) out[i] = HalfToFloat(in[i]);
  } else if (dtype == DType::kBF16) {
    for (size_t i = 0; i < count; ++i) out[i] = BFloat16ToFloat(in[i]);
  } else if (dst != src && count > 0) {
    std::memcpy(dst, src, count * DTypeSize(dtype));
  }
}

void FinalizeReduction(void* dst, const void* src, size_t count, DType dtype, ReduceOp op,
                       int contributors) {
  const bool average = op == ReduceOp::kAvg && contributors > 1;
  if (dtype == DType::kF16 || dtype == DType::kBF16) {
    const float* in = static_cast<const float*>(src);
    uint16_t* out = static_cast<uint16_t*>(dst);
    const float div = average ? static_cast<float>(contributors) : 1.0f;
    for (size_t i = 0; i < count; ++i) {
      const float v = in[i] / div;
      out[i] = dtype == DType::kF16 ? FloatToHalf(v) : FloatToBFloat16(v);
    }
    return;
  }
  if (!average) {
    if (dst != src && count > 0) std::memcpy(dst, src, count * DTypeSize(dtype));
    return;
  }
  switch (dtype) {
    case DType::kF32:
      return DivideTyped<float>(dst, src, count, contributors);
    case DType::kF64:
      return DivideTyped<double>(dst, src, count, contributors);
    case DType::kI32:
      return DivideTyped<int32_t>(dst, src, count, contributors);
    case DType::kI64:
      return DivideTyped<int64_t>(dst, src, count, contributors);
    case DType::kU8:
      return DivideTyped<uint8_t>(dst, src, count, contributors);
    default:
      return;
  }
}

}  // namespace hmc
