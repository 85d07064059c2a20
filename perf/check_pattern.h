#ifndef HMC_PERF_CHECK_PATTERN_H_
#define HMC_PERF_CHECK_PATTERN_H_

#include <cstddef>

#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// Input data whose reductions are exact in every dtype and op, so results can be compared bit for
// bit with a reference computed serially, independent of any algorithm (as nccl-tests' check).
// Sums over up to 16 ranks stay below 256 (exact in bf16 and u8); products stay below 16.
double PatternValue(int rank, size_t index, DType dtype, ReduceOp op);

// The reduction of PatternValue over `ranks` at `index`, computed rank by rank in double.
double ReferenceReduction(int ranks, size_t index, DType dtype, ReduceOp op);

// Every pattern value, and so every reduction of them, repeats after this many indices (16 for
// sum and average, 5 for product, 101 for min and max): fills and checks compute one period and
// copy or compare the rest, which keeps 64 MiB checks cheap.
inline constexpr size_t kPatternPeriod = 16 * 5 * 101;

// Writes PatternValue(rank, offset + i) into count elements.
void FillPattern(void* data, size_t count, DType dtype, int rank, ReduceOp op, size_t offset = 0);

// How many of `count` elements differ from PatternValue(rank, offset + i) rounded to dtype.
size_t CountPatternMismatches(const void* data, size_t count, DType dtype, int rank, ReduceOp op,
                              size_t offset = 0);

// How many of `count` elements differ from ReferenceReduction(ranks, offset + i) rounded to dtype.
size_t CountReductionMismatches(const void* data, size_t count, DType dtype, int ranks, ReduceOp op,
                                size_t offset = 0);

}  // namespace hmc

#endif  // HMC_PERF_CHECK_PATTERN_H_
