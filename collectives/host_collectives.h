#ifndef HMC_COLLECTIVES_HOST_COLLECTIVES_H_
#define HMC_COLLECTIVES_HOST_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "collectives/arg_check.h"
#include "collectives/collective_context.h"
#include "collectives/partition.h"
#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// Host-memory collectives built from the ring pieces. 16-bit floats are converted to f32 once,
// reduced in f32 and rounded once by the owner of each block; every other rank receives the
// owner's bytes, so all ranks end bit-identical.

// Where an all-reduce keeps partial sums: in `out` itself, unless the type needs a wider
// accumulator; then in scratch memory that starts as the input, converted. `src` is what the
// first step reads.
struct Accumulation {
  DType type;
  size_t element_bytes;
  const uint8_t* src;
  uint8_t* acc;
};
Accumulation PrepareAccumulation(CollectiveContext& ctx, const void* in, void* out, size_t count,
                                 DType dtype);

// The pipeline segment of the ring collectives, in elements of `type`.
size_t RingSegmentElems(size_t chunk_bytes, DType type);

// out = reduce(in) over all ranks; `in` may equal `out`. `early`, where the argument check ran:
// the segments of the first step that left with it (RingFirstStepOf), sent already.
absl::Status RingAllReduce(CollectiveContext& ctx, const void* in, void* out, size_t count,
                           DType dtype, ReduceOp op, const EarlyData* early = nullptr);
// What the all-reduce's first step sends the next rank: this rank's share of block rank-1, as
// pipeline segments of `segment_elems`, straight from the input; none (an empty range) where the
// type is reduced in a wider accumulator, whose copy does not exist before the call runs.
struct RingFirstStep {
  Range elements;
  size_t segment_elems = 1;
};
RingFirstStep RingFirstStepOf(int rank, int size, size_t count, DType dtype, size_t chunk_bytes);

// `in` holds size·count elements; rank r's `out` (count elements) gets block r reduced.
absl::Status RingReduceScatterBlocks(CollectiveContext& ctx, const void* in, void* out,
                                     size_t count, DType dtype, ReduceOp op);

// `in` holds count elements; `out` (size·count) gets every rank's block in rank order. `in` may
// point at this rank's block of `out`.
absl::Status RingAllGatherBlocks(CollectiveContext& ctx, const void* in, void* out, size_t count,
                                 DType dtype);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_HOST_COLLECTIVES_H_
