#include "perf/check_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

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

namespace {

// The first period of `value` (at most `count` elements), each rounded to dtype: what the rest of
// the elements repeat.
std::vector<uint8_t> Periodic(size_t count, DType dtype,
                              const std::function<double(size_t)>& value) {
  const size_t es = DTypeSize(dtype), period = std::min(count, kPatternPeriod);
  std::vector<uint8_t> out(period * es);
  for (size_t i = 0; i < period; ++i) StoreFromDouble(out.data(), i, dtype, value(i));
  return out;
}

// How many of `count` elements differ from `value` rounded to dtype, compared a period at a time,
// and element by element (as values: 0 and -0 are equal) only where a period's bytes differ.
size_t CountPeriodicMismatches(const void* data, size_t count, DType dtype,
                               const std::function<double(size_t)>& value) {
  const std::vector<uint8_t> reference = Periodic(count, dtype, value);
  const size_t es = DTypeSize(dtype), period = reference.size() / es;
  const auto* bytes = static_cast<const uint8_t*>(data);
  size_t wrong = 0;
  for (size_t start = 0; start < count; start += period) {
    const size_t n = std::min(period, count - start);
    if (std::memcmp(bytes + start * es, reference.data(), n * es) == 0) continue;
    for (size_t i = 0; i < n; ++i) {
      if (LoadAsDouble(bytes, start + i, dtype) != LoadAsDouble(reference.data(), i, dtype)) {
        ++wrong;
      }
    }
  }
  return wrong;
}

}  // namespace

void FillPattern(void* data, size_t count, DType dtype, int rank, ReduceOp op, size_t offset) {
  const std::vector<uint8_t> period =
      Periodic(count, dtype, [&](size_t i) { return PatternValue(rank, offset + i, dtype, op); });
  auto* bytes = static_cast<uint8_t*>(data);
  const size_t total = count * DTypeSize(dtype);
  for (size_t done = 0; done < total; done += period.size()) {
    std::memcpy(bytes + done, period.data(), std::min(period.size(), total - done));
  }
}

size_t CountPatternMismatches(const void* data, size_t count, DType dtype, int rank, ReduceOp op,
                              size_t offset) {
  return CountPeriodicMismatches(
      data, count, dtype, [&](size_t i) { return PatternValue(rank, offset + i, dtype, op); });
}

size_t CountReductionMismatches(const void* data, size_t count, DType dtype, int ranks, ReduceOp op,
                                size_t offset) {
  return CountPeriodicMismatches(data, count, dtype, [&](size_t i) {
    return ReferenceReduction(ranks, offset + i, dtype, op);
  });
}

}  // namespace hmc
