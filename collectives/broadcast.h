#ifndef HMC_COLLECTIVES_BROADCAST_H_
#define HMC_COLLECTIVES_BROADCAST_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "collectives/collective_context.h"

namespace hmc {

// Pipelined chain broadcast: root -> root+1 -> ... in segments of the context's chunk size, each
// forwarded as soon as it arrives; time ≈ bytes/bandwidth + (n-2)·segment/bandwidth.
absl::Status ChainBroadcast(CollectiveContext& ctx, uint8_t* buffer, size_t bytes, int root);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_BROADCAST_H_
