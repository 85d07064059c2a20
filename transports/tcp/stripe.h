#ifndef HMC_TRANSPORTS_TCP_STRIPE_H_
#define HMC_TRANSPORTS_TCP_STRIPE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace hmc {

// How a message is cut into stripes, one per stream. Sender and receiver compute it from the
// message length alone, so a stripe header only names its index. Stripes are 4 KiB aligned.
inline uint16_t StripeCount(uint64_t bytes, int streams, uint64_t stripe_min_bytes) {
  if (bytes < stripe_min_bytes || streams <= 1) return 1;
  return static_cast<uint16_t>(std::min<uint64_t>(streams, (bytes + 4095) / 4096));
}

struct StripeRange {
  uint64_t offset;
  uint64_t bytes;
};

inline StripeRange StripeOf(uint64_t total, uint16_t stripes, uint16_t index) {
  const uint64_t per = ((total + stripes - 1) / stripes + 4095) / 4096 * 4096;
  const uint64_t begin = std::min<uint64_t>(total, per * index);
  const uint64_t end = std::min<uint64_t>(total, begin + per);
  return {begin, end - begin};
}

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_STRIPE_H_
