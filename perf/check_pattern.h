#ifndef HMC_PERF_CHECK_PATTERN_H_
#define HMC_PERF_CHECK_PATTERN_H_

#include <cstddef>
#include <functional>

#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// Input data whose reductions are exact in every dtype and op, so results can be compared bit for
// bit with a reference computed serially, independent of any algorithm (as nccl-tests' check).
// Sums over up to 16 ranks stay below 256 (exact in bf16 and u8); products stay below 16.
double PatternValue(int rank, size_t index, DType dtype, ReduceOp op);

// The reduction of PatternValue over `ranks` at `index`, computed rank by rank in double.
double ReferenceReduction(int ranks, size_t index, DType dtype, ReduceOp op);

// Writes PatternValue(rank, offset + i) into count elements.
void FillPattern(void* data, size_t count, DType dtype, int rank, ReduceOp op, size_t offset = 0);

// How many of `count` elements differ from expected(i) rounded to dtype.
size_t CountMismatches(const void* data, size_t count, DType dtype,
                       const std::function<double(size_t)>& expected);

}  // namespace hmc

#endif  // HMC_PERF_CHECK_PATTERN_H_
