#ifndef HMC_COLLECTIVES_HALVING_DOUBLING_H_
#define HMC_COLLECTIVES_HALVING_DOUBLING_H_

#include <cstddef>

#include "absl/status/status.h"
#include "collectives/collective_context.h"
#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// Rabenseifner's all-reduce for small messages: recursive halving reduce-scatter, then recursive
// doubling all-gather, 2·log2(p) latency terms instead of the ring's 2(n-1). With n not a power
// of two, the first 2·(n-p) ranks pair up: the even one hands its vector to the odd one and gets
// the result back at the end. Each element is reduced at exactly one rank and relayed as bytes.
absl::Status HalvingDoublingAllReduce(CollectiveContext& ctx, const void* in, void* out,
                                      size_t count, DType dtype, ReduceOp op);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_HALVING_DOUBLING_H_
