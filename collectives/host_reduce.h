#ifndef HMC_COLLECTIVES_HOST_REDUCE_H_
#define HMC_COLLECTIVES_HOST_REDUCE_H_

#include <cstddef>

#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// Element-wise reduction on host memory: dst[i] = op(a[i], b[i]); dst may alias a or b. For kAvg
// this sums (the division happens once, in FinalizeReduction). min/max return the first operand
// when the comparison is false, so a NaN in `a` is kept and one in `b` is ignored; every element
// is reduced at exactly one rank, so all ranks still end with the same bits.
// The 16-bit float types are never reduced directly: they accumulate in f32 (AccumulatorType).
void ReduceHost(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);

// Converts `count` elements of `dtype` into its accumulator type (f16/bf16 -> f32; a copy for the
// others). dst and src must not overlap unless they are the same pointer of a non-16-bit type.
void ToAccumulator(void* dst, const void* src, size_t count, DType dtype);

// Writes the final value of reduced accumulator elements as `dtype`: divides by `contributors` for
// kAvg (integers truncate toward zero) and converts f32 back to f16/bf16 (round to nearest even).
// dst may equal src when dtype is its own accumulator type.
void FinalizeReduction(void* dst, const void* src, size_t count, DType dtype, ReduceOp op,
                       int contributors);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_HOST_REDUCE_H_
