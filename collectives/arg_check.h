#ifndef HMC_COLLECTIVES_ARG_CHECK_H_
#define HMC_COLLECTIVES_ARG_CHECK_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "collectives/collective_context.h"
#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

enum class CollectiveKind : uint8_t {
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kBarrier = 5,
  kAverage = 6,  // An attempt of a fault-tolerant averaging round (averaging.h).
};

const char* CollectiveName(CollectiveKind kind);

// What every rank must agree on before data moves.
struct CallDescriptor {
  CollectiveKind kind = CollectiveKind::kBarrier;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  uint8_t algorithm = 0;
  int32_t root = 0;
  uint64_t count = 0;  // Per-rank element count (the block for reduce-scatter and all-gather).
  bool locally_invalid = false;  // This rank's own checks refused its arguments.
  uint32_t plan = 0;             // Fingerprint of the codecs and shares this rank will use.
  uint64_t round = 0;            // Average: the round (compared).
  double weight = 0;             // Average: this rank's weight (shared, not compared).
  uint64_t state = 0;            // Average: the shared state's fingerprint, 0: none (compared).
  bool stale = false;            // Average: this rank downloads the state (shared).
};

// Every rank sends its descriptor to every other (one round trip, tiny messages) and compares them
// all, so every rank returns the same verdict: OK, or InvalidArgument listing each field that
// differs with every rank's value. With identical descriptors this doubles as a barrier.
// `all`, if given, receives every rank's descriptor (what is shared, not compared: Average's
// weights and who is stale).
absl::Status CheckArguments(CollectiveContext& ctx, const CallDescriptor& mine,
                            std::vector<CallDescriptor>* all = nullptr);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_ARG_CHECK_H_
