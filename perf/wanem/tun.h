#ifndef HMC_PERF_WANEM_TUN_H_
#define HMC_PERF_WANEM_TUN_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/socket.h"

namespace hmc::wanem {

// Creates a layer-3 TUN interface (no packet-info header) in the current network namespace and
// returns its non-blocking descriptor. The interface can then be moved into another namespace
// (`ip link set NAME netns NS`) while this descriptor keeps reading and writing its packets.
absl::StatusOr<UniqueFd> CreateTun(const std::string& name);

}  // namespace hmc::wanem

#endif  // HMC_PERF_WANEM_TUN_H_
