#include "collectives/bandwidth_model.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "collectives/hierarchical.h"

namespace hmc {
namespace {

// The links of one phase carry data at once. The matrix's rates were measured with every link
// busy, so a link got its share of its sender's and its receiver's NIC; in a phase where fewer of
// their links are busy, the NIC's total (the sum of its links' measured rates) is shared among the
// busy ones in proportion to their measured rates (a link kept down by a path, not a NIC, is
// overrated: the matrix cannot tell them apart). The phase lasts as long as its slowest link's
// bytes, plus its latencies at the longest one-way latency among its links.
class PhaseModel {
 public:
  explicit PhaseModel(const LinkMatrix& links) : links_(links) {}

  void Carry(int from, int to, double bytes) {
    if (from != to && bytes > 0) carried_[{from, to}] += bytes;
  }

  double Seconds(int latencies) const {
    const int n = links_.size;
    std::vector<double> nic_out(n), nic_in(n), busy_out(n), busy_in(n);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        nic_out[a] += links_.rate(a, b);
        nic_in[b] += links_.rate(a, b);
      }
    }
    for (const auto& [link, bytes] : carried_) {
      busy_out[link.first] += links_.rate(link.first, link.second);
      busy_in[link.second] += links_.rate(link.first, link.second);
    }
    double transfer_s = 0, latency_s = 0;
    for (const auto& [link, bytes] : carried_) {
      const auto [a, b] = link;
      const double mbit = links_.rate(a, b);
      const double bytes_per_s =
          mbit > 0 ? std::min(nic_out[a] / busy_out[a], nic_in[b] / busy_in[b]) * mbit * 1e6 / 8
                   : kUnmeasuredBytesPerS;
      transfer_s = std::max(transfer_s, bytes / bytes_per_s);
      const double rtt_ms = links_.rtt(a, b);
      latency_s = std::max(latency_s, rtt_ms > 0 ? rtt_ms / 2e3 : kUnmeasuredLatencyS);
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
  return std::nullopt;
}

}  // namespace hmc
