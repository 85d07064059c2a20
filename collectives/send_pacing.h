#ifndef HMC_COLLECTIVES_SEND_PACING_H_
#define HMC_COLLECTIVES_SEND_PACING_H_

#include <cstdint>
#include <vector>

#include "transports/transport.h"

namespace hmc {

// How a rank that sends on several links at once shares its sending rate among them: each link's
// part is in proportion to the bytes it must carry, so that all of them would finish together at
// the sum of the bytes over the rate. Unpaced, the links share the NIC's queue as TCP makes them:
// flows with short round trips take most of it while it is full, and those with long ones, which
// needed it most, finish last (on the emulated four continents the cross-zone exchange took about
// 1.6x its bound unpaced, 1.1-1.2x paced: perf/RESULTS.md). The sender's rate alone decides, so
// this suits exchanges whose receivers take what is sent (one holder per zone, alike); a link
// into a slower NIC cannot reach its part while the sender's other links are held to theirs
// (butterfly.h: flat butterflies are not paced).
//
// The rate must be the NIC's or a little under it: paced 25% above, the links filled the NIC's
// queue again and kept little of the gain. It comes from a phase that kept the NIC busy on links
// faster than it (CollectiveContext::NoteSendRate); the probe's matrix, measured over seconds
// that include slow start, gave 57-90% of the NIC on the emulated continents.
//
// Returns bytes/s for each link (0 where it carries nothing), or all zeros where pacing does not
// apply: no known rate, or fewer than two links carrying data.
std::vector<uint64_t> PacingRates(double send_bytes_per_s, const std::vector<uint64_t>& bytes_to);

// Paces channels for as long as it lives; lifts their caps when destroyed.
class SendPacing {
 public:
  SendPacing() = default;
  // `channels[i]` gets `rates[i]` where that is above 0.
  SendPacing(const std::vector<Channel*>& channels, const std::vector<uint64_t>& rates);
  SendPacing(SendPacing&& other) noexcept : paced_(std::move(other.paced_)) {}
  SendPacing(const SendPacing&) = delete;
  SendPacing& operator=(const SendPacing&) = delete;
  SendPacing& operator=(SendPacing&&) = delete;
  ~SendPacing();

 private:
  std::vector<Channel*> paced_;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_SEND_PACING_H_
