#include "collectives/shares.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hmc {

std::vector<double> BalancedShares(const std::vector<double>& bandwidth) {
  const size_t n = bandwidth.size();
  const std::vector<double> equal(n, n > 0 ? 1.0 / static_cast<double>(n) : 0.0);
  if (n <= 2) return equal;  // Each peer's traffic is the vector's size whatever the split.
  const double slowest = *std::min_element(bandwidth.begin(), bandwidth.end());
  if (!(slowest > 0) || !std::isfinite(slowest)) return equal;
  const double spread = static_cast<double>(n - 2);
  // Shares that let every peer finish by time T (S = 1), before normalising.
  auto shares_at = [&](double t) {
    std::vector<double> s(n);
    for (size_t i = 0; i < n; ++i) s[i] = std::max(0.0, (t * bandwidth[i] - 1) / spread);
    return s;
  };
  auto total = [](const std::vector<double>& s) {
    return std::accumulate(s.begin(), s.end(), 0.0);
  };
  // At T = (n - 1)/slowest every peer could take all of it; the answer lies below.
  double low = 0, high = (spread + 1) / slowest;
  for (int i = 0; i < 100; ++i) {
    const double mid = (low + high) / 2;
    (total(shares_at(mid)) < 1 ? low : high) = mid;
  }
  std::vector<double> s = shares_at(high);
  const double sum = total(s);
  for (double& x : s) x /= sum;
  return s;
}

std::vector<Range> PartsByWeight(size_t count, const std::vector<double>& weights) {
  const size_t n = weights.size();
  double sum = 0;
  for (double w : weights) sum += std::max(0.0, w);
  std::vector<Range> parts(n);
  double cumulative = 0;
  size_t begin = 0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += sum > 0 ? std::max(0.0, weights[i]) : 1.0;
    const double fraction = cumulative / (sum > 0 ? sum : static_cast<double>(n));
    const size_t end =
        i + 1 == n ? count : std::min(count, static_cast<size_t>(std::llround(fraction * count)));
    parts[i] = Range{begin, std::max(end, begin) - begin};
    begin = std::max(end, begin);
  }
  return parts;
}

}  // namespace hmc
