#ifndef HMC_CORE_FNV_H_
#define HMC_CORE_FNV_H_

#include <cstddef>
#include <cstdint>

namespace hmc {

// FNV-1a, 64 bits: a quick fingerprint of bytes, to tell whether two copies agree (state hashes in
// logs, a link probe's identity). It stops no one who means harm: what crosses the network between
// members is checked with SHA-256. Chain calls by passing the last result as `hash`.
inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

inline uint64_t Fnv1a(const void* data, size_t bytes, uint64_t hash = kFnv1aOffset) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

}  // namespace hmc

#endif  // HMC_CORE_FNV_H_
