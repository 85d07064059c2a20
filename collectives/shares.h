#ifndef HMC_COLLECTIVES_SHARES_H_
#define HMC_COLLECTIVES_SHARES_H_

#include <cstddef>
#include <vector>

#include "collectives/partition.h"

namespace hmc {

// The share of a butterfly all-reduce each peer should reduce, from each peer's bandwidth (any
// unit; all must be positive, else the shares are equal). A peer that reduces a share s of a
// vector of S bytes sends (1 - s)·S of contributions and (n - 1)·s·S of results, and receives as
// much, so its time is S·(1 + (n - 2)·s)/b. The shares minimize the slowest peer's time (as
// Hivemind's load balancing does, from measured instead of declared bandwidth): every peer with a
// share finishes together at T, s = (T·b/S - 1)/(n - 2); a peer too slow to finish by T even with
// nothing to reduce gets a share of zero.
std::vector<double> BalancedShares(const std::vector<double>& bandwidth);

// Splits `count` elements into consecutive parts, one per weight, in proportion (weights are
// non-negative; all zero splits equally). Deterministic, so every rank computes the same parts.
std::vector<Range> PartsByWeight(size_t count, const std::vector<double>& weights);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_SHARES_H_
