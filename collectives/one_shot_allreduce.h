#ifndef HMC_COLLECTIVES_ONE_SHOT_ALLREDUCE_H_
#define HMC_COLLECTIVES_ONE_SHOT_ALLREDUCE_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "collectives/arg_check.h"
#include "collectives/collective_context.h"
#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// The one-shot all-reduce for small messages on long paths: every rank sends its whole vector to
// every other at once and reduces the n vectors itself, in rank order, so every rank computes the
// same bits. One latency term (the slowest link's one-way delay) instead of halving-doubling's
// 2·log2(n); each rank sends (n-1)× its vector, so it pays only while the vector is small.
// Its vector can leave with the argument check (`early`: the first bytes in the check's own
// messages, the rest tagged (Phase::kOneShot, 0, 0) before the verdict), so that the check costs
// no round trip and no message of its own; a member that sent none that way sends it all after
// the verdict, under that tag.
absl::Status OneShotAllReduce(CollectiveContext& ctx, const void* in, void* out, size_t count,
                              DType dtype, ReduceOp op, const EarlyData* early = nullptr);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_ONE_SHOT_ALLREDUCE_H_
