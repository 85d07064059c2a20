#ifndef HMC_PERF_PERF_RANK_H_
#define HMC_PERF_PERF_RANK_H_

// What hmc-perf's modes share on a rank: gradient-like input for lossy codecs and its error, and
// the bookkeeping reductions between timed calls.
#include <cstddef>

#include "collectives/communicator.h"

namespace hmc::perf {

// Gradient-like values for runs with lossy codecs (the exact patterns are small integers, which
// quantize unlike gradients): a deterministic normal deviate per (rank, index), scaled by rank.
float GaussianValue(int rank, size_t index);

// Relative L2 error of an f32 sum or average over `ranks` of GaussianValue against the exact
// reduction in double, over every `stride`-th value (the exact value costs `ranks` deviates).
double GaussianError(ReduceOp op, int ranks, const float* out, size_t count, size_t stride = 1);

// Reduces `count` values in place across the group (times, counts, checksums); prints the error
// and returns false if that fails. Always by halving-doubling, whatever --algo forces, so that
// what runs between two timed calls is the same for every plan.
bool ReduceInPlace(Communicator& comm, void* data, size_t count, DType dtype, ReduceOp op);

}  // namespace hmc::perf

#endif  // HMC_PERF_PERF_RANK_H_
