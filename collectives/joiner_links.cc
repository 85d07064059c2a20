#include "collectives/joiner_links.h"

#include <cmath>
#include <limits>

#include "core/fnv.h"
#include "core/wire.h"

namespace hmc {
namespace {

// The probe position whose links stand for joiner `e`'s; -1 if none.
int StandIn(const LinkProbeRecord& probe, const PeerTable& table, const PeerEntry& e) {
  const int n = static_cast<int>(probe.ids.size());
  int best = -1;
  double best_score = std::numeric_limits<double>::infinity();
  for (int k = 0; k < n; ++k) {
    if (table.peers[probe.ids[k]].zone != e.zone) continue;
    // How far its round trips to the other probed ranks are from the joiner's own, in ratios
    // (plus 50 us, so that sub-millisecond links do not dominate).
    double score = 0;
    for (int m = 0; m < n; ++m) {
      const int id = probe.ids[m];
      const std::vector<double>& rtt_ms = e.joined.rtt_ms;
      if (m == k || id >= static_cast<int>(rtt_ms.size()) || rtt_ms[id] <= 0) {
        continue;
      }
      score += std::abs(std::log((rtt_ms[id] + 0.05) / (probe.links.rtt(m, k) + 0.05)));
    }
    if (score < best_score) {
      best = k;
      best_score = score;
    }
  }
  return best;
}

// The fastest probed rate from position `k` to another of its zone: what a link between two ranks
// that `k` stands in for is taken to carry; 0 if `k` has no probed zone-mate.
double ZoneRate(const LinkProbeRecord& probe, const PeerTable& table, int k) {
  double rate = 0;
  for (size_t m = 0; m < probe.ids.size(); ++m) {
    if (static_cast<int>(m) == k ||
        table.peers[probe.ids[m]].zone != table.peers[probe.ids[k]].zone) {
      continue;
    }
    rate = std::max(rate, probe.links.rate(k, static_cast<int>(m)));
  }
  return rate;
}

// What joiner `b` measured to `a` when it connected; -1 if it did not.
double MeasuredBy(const PeerEntry& b, int a) {
  return a < static_cast<int>(b.joined.rtt_ms.size()) ? b.joined.rtt_ms[a] : -1;
}

}  // namespace

std::string LinkProbeRecord::Serialize() const {
  WireWriter w;
  const int n = static_cast<int>(ids.size());
  w.Put<uint32_t>(static_cast<uint32_t>(n));
  for (int id : ids) w.Put<int32_t>(id);
  for (int i = 0; i < n * n; ++i) w.Put<double>(links.rtt_ms[i]);
  for (int i = 0; i < n * n; ++i) w.Put<double>(links.mbit[i]);
  w.Put<double>(links.auto_codec_bytes_per_s);
  return std::string(w.bytes().begin(), w.bytes().end());
}

absl::StatusOr<LinkProbeRecord> LinkProbeRecord::Parse(absl::string_view bytes) {
  WireReader r(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  LinkProbeRecord record;
  const uint32_t n = r.Get<uint32_t>();
  if (static_cast<uint64_t>(n) * n * 2 * sizeof(double) > bytes.size()) {
    return absl::DataLossError("link probe record: more ranks than bytes");
  }
  for (uint32_t i = 0; i < n; ++i) {
    const int32_t id = r.Get<int32_t>();
    if (id < 0 || id >= (1 << 20)) return absl::DataLossError("link probe record: bad rank id");
    record.ids.push_back(id);
  }
  record.links.size = static_cast<int>(n);
  for (uint32_t i = 0; i < n * n; ++i) record.links.rtt_ms.push_back(r.Get<double>());
  for (uint32_t i = 0; i < n * n; ++i) record.links.mbit.push_back(r.Get<double>());
  record.links.auto_codec_bytes_per_s = r.Get<double>();
  if (!r.done()) return absl::DataLossError("link probe record: truncated or trailing bytes");
  return record;
}

uint64_t LinkProbeRecord::Fingerprint() const {
  if (empty()) return 0;
  const std::string bytes = Serialize();
  const uint64_t h = Fnv1a(bytes.data(), bytes.size());
  return h == 0 ? 1 : h;
}

LinkMatrix WorldLinks(const LinkProbeRecord& probe, const PeerTable& table) {
  const int n = table.world_size;
  if (probe.empty() || static_cast<int>(table.peers.size()) != n) return {};
  std::vector<int> standin(n, -1);
  for (size_t k = 0; k < probe.ids.size(); ++k) {
    if (probe.ids[k] >= n) return {};  // A table older than the probe.
    standin[probe.ids[k]] = static_cast<int>(k);
  }
  const uint64_t basis = probe.Fingerprint();
  for (const PeerEntry& e : table.peers) {
    if (standin[e.rank] < 0 && e.joined.probe == basis) standin[e.rank] = StandIn(probe, table, e);
  }
  for (int id : table.Members()) {
    if (standin[id] < 0) return {};
  }
  LinkMatrix world;
  world.size = n;
  world.rtt_ms.assign(static_cast<size_t>(n) * n, 0.0);
  world.mbit.assign(static_cast<size_t>(n) * n, 0.0);
  world.auto_codec_bytes_per_s = probe.links.auto_codec_bytes_per_s;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const int pa = standin[a], pb = standin[b];
      if (a == b || pa < 0 || pb < 0) continue;
      const bool probed = probe.ids[pa] == a && probe.ids[pb] == b;
      // The later of the two measured the other when it joined.
      const double measured =
          std::max(MeasuredBy(table.peers[b], a), MeasuredBy(table.peers[a], b));
      double rtt, rate;
      if (probed) {
        rtt = probe.links.rtt(pa, pb);
        rate = probe.links.rate(pa, pb);
      } else {
        rtt = measured >= 0 ? measured : probe.links.rtt(pa, pb);
        // Within a host (measured 0) no rate, as the probe does; a joiner and the rank that
        // stands in for it: their zone's (0, unmeasured, without a probed zone-mate).
        rate = measured == 0 ? 0 : pa != pb ? probe.links.rate(pa, pb) : ZoneRate(probe, table, pa);
      }
      world.rtt_ms[static_cast<size_t>(a) * n + b] = rtt;
      world.mbit[static_cast<size_t>(a) * n + b] = rate;
    }
  }
  return world;
}

}  // namespace hmc
