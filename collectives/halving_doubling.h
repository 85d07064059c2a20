#ifndef HMC_COLLECTIVES_HALVING_DOUBLING_H_
#define HMC_COLLECTIVES_HALVING_DOUBLING_H_

#include <cstddef>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "collectives/collective_context.h"
#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// Rabenseifner's all-reduce for small messages: recursive halving reduce-scatter, then recursive
// doubling all-gather, 2·log2(p) latency terms instead of the ring's 2(n-1). With n not a power
// of two, the first 2·(n-p) ranks pair up: the even one hands its vector to the odd one and gets
// the result back at the end. Each element is reduced at exactly one rank and relayed as bytes.
// `sent_early`: this rank's first message (HalvingDoublingFirstSend), if it left with the
// argument check (arg_check.h, early data); sent here otherwise.
absl::Status HalvingDoublingAllReduce(CollectiveContext& ctx, const void* in, void* out,
                                      size_t count, DType dtype, ReduceOp op,
                                      std::vector<CollectiveContext::Pending> sent_early = {});

// A rank's first message where it is a piece of its own input: a folding rank's whole vector to
// its pair (phase kFold), or the first half-exchange of a rank that does not fold (kHalving, step
// 0), elements [begin, begin + count) to `to`. None for a rank that first receives a fold (its
// first message carries the fold's sum) or where the accumulator's type is not the input's.
struct HalvingDoublingSend {
  int to;
  Phase phase;
  size_t begin;
  size_t count;
};
// The most of that first message that leaves early. Above it the first half-exchange (both
// partners' messages early at once) made 4-rank calls on loopback slower, not faster: at 512 KiB
// 3.9–4.6 ms against 1.5–1.7 ms, cause not found (perf/RESULTS.md). The tuner picks
// halving-doubling only below small_message_bytes (256 KiB), whose halves are within it.
inline constexpr size_t kMaxHalvingDoublingEarlyBytes = 128 << 10;
std::optional<HalvingDoublingSend> HalvingDoublingFirstSend(int rank, int size, size_t count,
                                                            DType dtype);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_HALVING_DOUBLING_H_
