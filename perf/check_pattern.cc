#include "perf/check_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/typed_values.h"

namespace hmc {

double PatternValue(int rank, size_t index, DType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return static_cast<double>((index * 7 + static_cast<size_t>(rank) * 3) % 16);
    case ReduceOp::kProd:
      // 2 for at most two ranks of any eight, 1 otherwise.
      return (index + static_cast<size_t>(rank)) % 5 == 0 ? 2.0 : 1.0;
    case ReduceOp::kMin:
    case ReduceOp::kMax: {
      const double v = static_cast<double>((index * 13 + static_cast<size_t>(rank) * 29) % 101);
      return dtype == DType::kU8 ? v : v - 50.0;
    }
  }
  return 0;
}

double ReferenceReduction(int ranks, size_t index, DType dtype, ReduceOp op) {
  double acc = PatternValue(0, index, dtype, op);
  for (int r = 1; r < ranks; ++r) {
    const double v = PatternValue(r, index, dtype, op);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::kAvg) {
    const bool integer = dtype == DType::kI32 || dtype == DType::kI64 || dtype == DType::kU8;
    acc = integer ? std::trunc(acc / ranks) : acc / ranks;
  }
  return acc;
}

void FillPattern(void* data, size_t count, DType dtype, int rank, ReduceOp op, size_t offset) {
  for (size_t i = 0; i < count; ++i) {
    StoreFromDouble(data, i, dtype, PatternValue(rank, offset + i, dtype, op));
  }
}

size_t CountMismatches(const void* data, size_t count, DType dtype,
                       const std::function<double(size_t)>& expected) {
  size_t wrong = 0;
  uint64_t rounded_bits = 0;  // One element of scratch, wide enough for every dtype.
  for (size_t i = 0; i < count; ++i) {
    StoreFromDouble(&rounded_bits, 0, dtype, expected(i));
    if (LoadAsDouble(data, i, dtype) != LoadAsDouble(&rounded_bits, 0, dtype)) ++wrong;
  }
  return wrong;
}

}  // namespace hmc
