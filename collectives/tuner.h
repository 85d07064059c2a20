#ifndef HMC_COLLECTIVES_TUNER_H_
#define HMC_COLLECTIVES_TUNER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/link_probe.h"

namespace hmc {

// How one all-reduce runs. Every rank derives the same plan from the same inputs (options, the
// shared link matrix, the call's size), and the argument check compares fingerprints.
struct AllReducePlan {
  std::string algorithm;             // ring, halving_doubling, butterfly, hierarchical or one_shot.
  std::string codec_inter = "none";  // Codec on links between zones.
  std::string codec_intra = "none";  // Codec on links inside a zone.
  std::vector<double> shares;        // Butterfly: each rank's share of the vector.
  size_t chunk_bytes = 0;            // Pipeline segment.
  std::string why;                   // The rule that chose the algorithm, for reports.
  bool algorithm_forced = false;     // By an option or the call, not by the rules.
  uint32_t Fingerprint() const;
};

// What the tuner decides from. "auto" (or empty) leaves a choice to the tuner; anything else
// forces it.
struct TunerInput {
  size_t bytes = 0;
  std::vector<int> zone_of;           // Each rank's zone index.
  double cpu_share = 1;               // Group::cpu_share: of a CPU, each rank's least.
  const LinkMatrix* links = nullptr;  // Null or unmeasured: no measurements.
  std::string algo = "auto";
  std::string codec_inter = "none";
  std::string codec_intra = "none";
  std::string shares = "auto";  // auto, equal, or comma-separated weights per rank.
  size_t small_message_bytes = 256 << 10;
  size_t chunk_bytes = 2 << 20;
  // Encode speed of the lossy codec `auto` would pick, bytes/s per core (measured once).
  double codec_encode_bytes_per_s = 0;
};

// Whether the hierarchical plan differs from a ring: ranks in several zones, one of them holding
// two ranks or more (`zone_of`: each rank's zone index).
bool ZonesShareRanks(const std::vector<int>& zone_of);

// The codec `codec_*=auto` chooses where compression pays off.
inline constexpr char kAutoCodec[] = "int8:block=256";

// The rules (README "Tuner"):
//  1. A forced choice wins.
//  2. Below small_message_bytes (latency-bound): one-shot or halving-doubling, whichever a model
//     of the slowest link (half the longest round trip per latency, its rate per byte) makes
//     faster: one-shot pays one latency and sends (n-1)× the vector, halving-doubling pays
//     2·⌈log2 n⌉ latencies and sends 2(p-1)/p of the vector (p: the largest power of two up to
//     n; twice more where a rank folds). Unmeasured: 50 µs, and 1 GB/s times each rank's share
//     of a CPU on the most crowded host (cpu_share).
//     From small_message_bytes up to kMaxEarlyBytes, measured: one-shot where the bandwidth
//     model (bandwidth_model.h) makes it faster than the plan rules 3-5 choose, with the
//     argument check's latency that plan waits for.
//  3. Ranks in several zones, some zone holding two or more: hierarchical (each WAN link carries
//     1/k of the vector for zones of k).
//  4. Otherwise, with measurements: butterfly with balanced shares where the peers' bandwidths
//     differ by more than 1.5x (a slow peer reduces less), else ring.
//  5. Shares `auto`: balanced from measured bandwidth (BalancedShares), equal without it.
//  6. Codec `auto` per link class: int8 where the slowest link of the class carries less than
//     half of what one core encodes (compression then shortens the transfer by more than it
//     costs), none elsewhere.
//  7. Chunk: the option, but at most 1/4 of the part each rank reduces, at least 64 KiB, so that
//     short vectors still pipeline.
// Returns an error for a malformed `shares`.
absl::StatusOr<AllReducePlan> ChoosePlan(const TunerInput& input);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_TUNER_H_
