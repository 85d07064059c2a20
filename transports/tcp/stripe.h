#ifndef HMC_TRANSPORTS_TCP_STRIPE_H_
#define HMC_TRANSPORTS_TCP_STRIPE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/numeric/int128.h"

namespace hmc {

// How a message is cut into stripes, one per stream. Sender and receiver compute it from the
// message length alone, so a stripe header only names its index. Stripes are 4 KiB aligned.
inline uint16_t StripeCount(uint64_t bytes, int streams, uint64_t stripe_min_bytes) {
  if (bytes < stripe_min_bytes || streams <= 1) return 1;
  return static_cast<uint16_t>(std::min<uint64_t>(streams, (bytes + 4095) / 4096));
}

// A stripe set is tracked in a 64-bit mask.
inline constexpr uint16_t kMaxStripes = 64;

struct StripeRange {
  uint64_t offset;
  uint64_t bytes;
};

// `total` comes off the wire and may be anything: the arithmetic is done in 128 bits so that a
// length near 2^64 cannot wrap into a small, plausible stripe.
inline StripeRange StripeOf(uint64_t total, uint16_t stripes, uint16_t index) {
  const absl::uint128 whole = total;
  const absl::uint128 count = std::max<uint16_t>(stripes, 1);
  const absl::uint128 per = ((whole + count - 1) / count + 4095) / 4096 * 4096;
  const absl::uint128 begin = std::min(whole, per * index);
  const absl::uint128 end = std::min(whole, begin + per);
  return {absl::Uint128Low64(begin), absl::Uint128Low64(end - begin)};
}

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_STRIPE_H_
