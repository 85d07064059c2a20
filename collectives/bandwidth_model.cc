#include "collectives/bandwidth_model.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "collectives/arg_check.h"
#include "collectives/hierarchical.h"

namespace hmc {
namespace {

// The links of one phase carry data at once, each rank's through its NIC. A NIC's rate is the
// sum of its links' measured rates: the matrix measured every link busy at once, and a single
// link's share of that scatters (4.7 to 131 Mbit/s on the emulated four continents,
// perf/RESULTS.md) while the sum holds, which is why the share solver uses the sums too. The phase
// lasts as long as the busiest NIC takes to send or receive its bytes (links inside a host, not
// measured, bypass the NICs at kUnmeasuredBytesPerS), plus its latencies at the longest one-way
// latency among its links. What a path caps below its NICs (a per-flow policer) it cannot see.
class PhaseModel {
 public:
  explicit PhaseModel(const LinkMatrix& links) : links_(links) {}

  void Carry(int from, int to, double bytes) {
    if (from != to && bytes > 0) carried_[{from, to}] += bytes;
  }

  double Seconds(int latencies) const {
    const int n = links_.size;
    std::vector<double> nic_out(n), nic_in(n), bytes_out(n), bytes_in(n);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        nic_out[a] += links_.rate(a, b) * 1e6 / 8;
        nic_in[b] += links_.rate(a, b) * 1e6 / 8;
      }
    }
    double transfer_s = 0, latency_s = 0;
    for (const auto& [link, bytes] : carried_) {
      const auto [a, b] = link;
      if (links_.rate(a, b) > 0) {
        bytes_out[a] += bytes;
        bytes_in[b] += bytes;
      } else {
        transfer_s = std::max(transfer_s, bytes / kUnmeasuredBytesPerS);
      }
      const double rtt_ms = links_.rtt(a, b);
      latency_s = std::max(latency_s, rtt_ms > 0 ? rtt_ms / 2e3 : kUnmeasuredLatencyS);
    }
    for (int r = 0; r < n; ++r) {
      if (bytes_out[r] > 0) transfer_s = std::max(transfer_s, bytes_out[r] / nic_out[r]);
      if (bytes_in[r] > 0) transfer_s = std::max(transfer_s, bytes_in[r] / nic_in[r]);
    }
    return transfer_s + latencies * latency_s;
  }

 private:
  const LinkMatrix& links_;
  std::map<std::pair<int, int>, double> carried_;  // Bytes by (from, to).
};

double Ring(double bytes, int n, const LinkMatrix& links) {
  PhaseModel phase(links);
  for (int r = 0; r < n; ++r) phase.Carry(r, (r + 1) % n, 2.0 * (n - 1) / n * bytes);
  return phase.Seconds(2 * (n - 1));
}

double Butterfly(double bytes, int n, const std::vector<double>& shares, const LinkMatrix& links) {
  const double total = std::accumulate(shares.begin(), shares.end(), 0.0);
  PhaseModel phase(links);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      // a sends b the part b reduces, then its own reduced part.
      const double parts = total > 0 ? (shares[a] + shares[b]) / total : 2.0 / n;
      phase.Carry(a, b, parts * bytes);
    }
  }
  return phase.Seconds(2);
}

// Every rank sends its whole vector to every other at once, with the argument check's exchange
// (its early data): one phase, one latency, the check's included.
double OneShot(double bytes, int n, const LinkMatrix& links) {
  PhaseModel phase(links);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) phase.Carry(a, b, bytes);
  }
  return phase.Seconds(1);
}

double Hierarchical(double bytes, const std::vector<int>& zone_of, const LinkMatrix& links) {
  const ZoneLayout layout(zone_of);
  const std::vector<std::vector<int>>& zones = layout.zones;
  const int shards = layout.shards;
  const int zone_count = static_cast<int>(zones.size());
  PhaseModel in_zone(links), across(links), gather(links);
  int ring_steps = 0;
  for (const std::vector<int>& z : zones) {
    const int m = static_cast<int>(z.size());
    ring_steps = std::max(ring_steps, m - 1);
    for (int k = 0; k < m; ++k) {
      in_zone.Carry(z[k], z[(k + 1) % m], (m - 1.0) / m * bytes);
      const auto [first, last] = ZoneLayout::ShardsOf(k, m, shards);
      const double held = static_cast<double>(last - first) / shards;
      for (int mate : z) gather.Carry(z[k], mate, held * bytes);
    }
  }
  for (int shard = 0; shard < shards && zone_count > 1; ++shard) {
    for (size_t a = 0; a < zones.size(); ++a) {
      for (size_t b = 0; b < zones.size(); ++b) {
        // Each holder sends each other the part it reduces, then its reduced part.
        if (a != b) {
          across.Carry(layout.Holder(a, shard), layout.Holder(b, shard),
                       2.0 * bytes / shards / zone_count);
        }
      }
    }
  }
  // Across zones: the holders' meeting (AwaitMembers), then the butterfly's two exchanges.
  return in_zone.Seconds(ring_steps) + across.Seconds(zone_count > 1 ? 3 : 0) + gather.Seconds(1);
}

}  // namespace

std::optional<double> ModelledAllReduceSeconds(absl::string_view algorithm, size_t bytes,
                                               const std::vector<int>& zone_of,
                                               const std::vector<double>& shares,
                                               const LinkMatrix& links) {
  const int n = static_cast<int>(zone_of.size());
  if (!links.measured() || links.size != n || n < 2) return std::nullopt;
  const double b = static_cast<double>(bytes);
  if (algorithm == "ring") return Ring(b, n, links);
  if (algorithm == "butterfly" && static_cast<int>(shares.size()) == n) {
    return Butterfly(b, n, shares, links);
  }
  if (algorithm == "hierarchical") return Hierarchical(b, zone_of, links);
  if (algorithm == "one_shot" && bytes <= kMaxEarlyBytes) return OneShot(b, n, links);
  return std::nullopt;
}

}  // namespace hmc
