#include "collectives/tuner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "collectives/arg_check.h"
#include "collectives/bandwidth_model.h"
#include "collectives/halving_doubling.h"
#include "collectives/shares.h"
#include "core/frame.h"

namespace hmc {
namespace {

constexpr double kImbalanceForShares = 1.5;
constexpr size_t kMinChunkBytes = 64 << 10;

bool Auto(const std::string& choice) { return choice.empty() || choice == "auto"; }

absl::StatusOr<std::vector<double>> ParseWeights(const std::string& text, size_t ranks) {
  std::vector<double> weights;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    double w;
    if (!absl::SimpleAtod(item, &w) || w < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("shares=%s: '%s' is not a non-negative number", text, item));
    }
    weights.push_back(w);
  }
  if (weights.size() != ranks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shares=%s: %d weights for %d ranks (or use auto or equal)", text, weights.size(), ranks));
  }
  return weights;
}

// One latency of the rules' models: half the longest measured round trip, or a data centre's
// where nothing was measured. The argument check's exchange takes one.
double LatencyS(const LinkMatrix* links) {
  const bool measured = links != nullptr && links->measured() && links->LongestRtt() > 0;
  return measured ? links->LongestRtt() / 2e3 : kUnmeasuredLatencyS;
}

// Mbit/s that one core encodes with the auto codec; a link slower than half of it gains.
std::string AutoCodec(double slowest_mbit, double encode_bytes_per_s) {
  if (slowest_mbit <= 0 || encode_bytes_per_s <= 0) return "none";
  return slowest_mbit < 0.5 * encode_bytes_per_s * 8 / 1e6 ? kAutoCodec : "none";
}

// Rule 2, its second half: a vector too long for the first half yet short against the round trips
// it would wait through (hundreds of KiB across an ocean) goes one-shot where the bandwidth model
// makes that faster than the plan the later rules chose, whose time is the model's plus the
// argument check's latency it waits for. One-shot sends the vectors as they are, so where the plan
// encodes a class of link the group has (a codec named, or chosen for slow links), the plan stays.
void PreferOneShotWhereLatencyBound(const TunerInput& in, AllReducePlan& plan) {
  const std::set<int> zones(in.zone_of.begin(), in.zone_of.end());
  const bool has_inter = zones.size() > 1, has_intra = zones.size() < in.zone_of.size();
  if ((has_inter && plan.codec_inter != "none") || (has_intra && plan.codec_intra != "none")) {
    return;
  }
  const std::optional<double> one_shot =
      ModelledAllReduceSeconds("one_shot", in.bytes, in.zone_of, plan.shares, *in.links);
  const std::optional<double> chosen =
      ModelledAllReduceSeconds(plan.algorithm, in.bytes, in.zone_of, plan.shares, *in.links);
  if (!one_shot.has_value() || !chosen.has_value()) return;
  const double with_check = *chosen + LatencyS(in.links);
  if (*one_shot >= with_check) return;
  plan.why = absl::StrFormat("latency-bound: one-shot %.3g s, %s %.3g s with its argument check",
                             *one_shot, plan.algorithm, with_check);
  plan.algorithm = "one_shot";
}

}  // namespace

uint32_t AllReducePlan::Fingerprint() const {
  // Shares enter as the parts they produce at a fixed resolution, immune to the last bits. The
  // checksum is the wire's: the same in every process (absl::Hash is seeded per process).
  std::string text =
      absl::StrFormat("%s|%s|%s|%d|", algorithm, codec_inter, codec_intra, chunk_bytes);
  for (const Range& r : PartsByWeight(1 << 20, shares))
    absl::StrAppendFormat(&text, "%d,", r.count);
  return Checksum(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// The small-message algorithm whose modelled time is shorter: one-shot pays one latency (half the
// longest round trip) and sends (n-1)·bytes; halving-doubling pays 2·⌈log2 n⌉ latencies and sends
// 2(p-1)/p·bytes for p the largest power of two up to n, and a folded vector both ways where n is
// not one. Both at the slowest link's rate. Unmeasured, a byte's cost is a core's copy, and where a
// host's ranks outnumber its CPUs each rank has only its share of one (Group::cpu_share): there
// one-shot's (n-1) copies cost more than halving-doubling's extra latencies from a few tens of KiB.
std::pair<std::string, std::string> SmallMessageAlgorithm(const TunerInput& in, size_t n) {
  const double latency = LatencyS(in.links);
  double bytes_per_s = kUnmeasuredBytesPerS * std::clamp(in.cpu_share, 0.01, 1.0);
  if (in.links != nullptr && in.links->measured()) {
    double slowest = 0;
    for (bool across : {true, false}) {
      const double rate = in.links->SlowestRate(in.zone_of, across);
      if (rate > 0 && (slowest == 0 || rate < slowest)) slowest = rate;
    }
    if (slowest > 0) bytes_per_s = slowest * 1e6 / 8;
  }
  const double bytes = static_cast<double>(in.bytes);
  // Both pay the argument check's exchange (one latency), but where their first messages are
  // small enough they travel with it (arg_check.h, early data): the one-shot's whole vector, and
  // halving-doubling's first half (or a folding rank's vector), one message of at least the least
  // early segment.
  const bool one_shot_early = in.bytes <= kMaxEarlyBytes;
  const bool halving_doubling_early =
      in.bytes / 2 <= kMaxHalvingDoublingEarlyBytes && in.bytes / 2 >= kMinEarlySegmentBytes;
  const double one_shot =
      (one_shot_early ? 1 : 2) * latency + static_cast<double>(n - 1) * bytes / bytes_per_s;
  const size_t p = std::bit_floor(n);
  const double halving_doubling_bytes =
      (2.0 * static_cast<double>(p - 1) / static_cast<double>(p) + (p == n ? 0 : 2)) * bytes;
  const double halving_doubling =
      ((halving_doubling_early ? 0 : 1) + 2 * std::ceil(std::log2(static_cast<double>(n)))) *
          latency +
      halving_doubling_bytes / bytes_per_s;
  const std::string model = absl::StrFormat(
      "small message: one-shot %.3g s, halving-doubling %.3g s", one_shot, halving_doubling);
  return {one_shot <= halving_doubling ? "one_shot" : "halving_doubling", model};
}

bool ZonesShareRanks(const std::vector<int>& zone_of) {
  std::map<int, int> zone_sizes;
  for (int z : zone_of) ++zone_sizes[z];
  int largest_zone = 0;
  for (const auto& [zone, size] : zone_sizes) largest_zone = std::max(largest_zone, size);
  return zone_sizes.size() > 1 && largest_zone > 1;
}

absl::StatusOr<AllReducePlan> ChoosePlan(const TunerInput& in) {
  const size_t n = in.zone_of.size();
  const bool measured = in.links != nullptr && in.links->measured();
  std::vector<double> bandwidth = measured ? in.links->PeerBandwidth() : std::vector<double>();
  double imbalance = 1;
  if (measured) {
    const auto [lo, hi] = std::minmax_element(bandwidth.begin(), bandwidth.end());
    imbalance = *lo > 0 ? *hi / *lo : 1;
  }

  AllReducePlan plan;
  if (!Auto(in.algo)) {
    plan.algorithm = in.algo;
    plan.why = "forced";
    plan.algorithm_forced = true;
  } else if (in.bytes < in.small_message_bytes) {
    std::tie(plan.algorithm, plan.why) = SmallMessageAlgorithm(in, n);
  } else if (ZonesShareRanks(in.zone_of)) {
    plan.algorithm = "hierarchical";
    plan.why = "several zones";
  } else if (measured && imbalance > kImbalanceForShares) {
    plan.algorithm = "butterfly";
    plan.why = absl::StrFormat("peer bandwidths differ %.1fx", imbalance);
  } else {
    plan.algorithm = "ring";
    plan.why = measured ? "balanced links" : "no measurements";
  }

  if (in.shares == "equal" || (Auto(in.shares) && !measured)) {
    plan.shares.assign(n, 1.0 / static_cast<double>(n));
  } else if (Auto(in.shares)) {
    plan.shares = BalancedShares(bandwidth);
  } else {
    absl::StatusOr<std::vector<double>> weights = ParseWeights(in.shares, n);
    if (!weights.ok()) return weights.status();
    plan.shares = *weights;
  }

  const double inter = measured ? in.links->SlowestRate(in.zone_of, /*across_zones=*/true) : 0;
  const double intra = measured ? in.links->SlowestRate(in.zone_of, /*across_zones=*/false) : 0;
  plan.codec_inter =
      Auto(in.codec_inter) ? AutoCodec(inter, in.codec_encode_bytes_per_s) : in.codec_inter;
  plan.codec_intra =
      Auto(in.codec_intra) ? AutoCodec(intra, in.codec_encode_bytes_per_s) : in.codec_intra;

  if (Auto(in.algo) && measured && in.bytes >= in.small_message_bytes) {
    PreferOneShotWhereLatencyBound(in, plan);
  }

  const size_t per_rank = in.bytes / std::max<size_t>(1, n);
  plan.chunk_bytes = std::min(in.chunk_bytes, std::max(kMinChunkBytes, per_rank / 4));
  return plan;
}

}  // namespace hmc
