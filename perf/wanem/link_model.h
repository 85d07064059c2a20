#ifndef HMC_PERF_WANEM_LINK_MODEL_H_
#define HMC_PERF_WANEM_LINK_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "perf/wanem/topology.h"

namespace hmc::wanem {

// One shaping stage: a link of `bits_per_second` fed by a FIFO that holds at most `queue_bytes`.
// It works in virtual time: a packet's departure is computed when it arrives, which is exact for
// a FIFO and lets the emulator schedule each packet once. A rate of 0 is unlimited.
class RateStage {
 public:
  RateStage(double bits_per_second, uint64_t queue_bytes)
      : bytes_per_second_(bits_per_second / 8), queue_bytes_(queue_bytes) {}
  // When the packet has left the stage, or nullopt if the queue is full (a tail drop).
  std::optional<absl::Time> Pass(absl::Time arrival, uint64_t bytes);
  absl::Time free_at() const { return free_at_; }

 private:
  double bytes_per_second_;
  uint64_t queue_bytes_;
  absl::Time free_at_ = absl::InfinitePast();
};

// The fate of packets crossing an emulated topology: a packet from host A to host B passes A's
// NIC, its flow's cap (what one TCP stream reaches on that path), the path between the regions
// (shared by every host pair of those regions), B's NIC, then the one-way delay (rtt/2) plus
// jitter; it may be lost at random. Packets of one host pair are never reordered.
class LinkModel {
 public:
  struct Counters {
    uint64_t packets = 0;
    uint64_t bytes = 0;
    uint64_t queue_drops = 0;
    uint64_t random_losses = 0;
  };

  // Hosts are indexes into topology.hosts. Every needed path must exist (checked here).
  static absl::StatusOr<LinkModel> Create(const Topology& topology, uint64_t seed);

  // When the packet should be delivered to `to`, or nullopt if it is dropped.
  std::optional<absl::Time> Admit(int from, int to, uint64_t flow, uint64_t bytes, absl::Time now);
  const Counters& counters(int from, int to) const { return counters_[from * hosts_ + to]; }

 private:
  LinkModel() = default;

  int hosts_ = 0;
  uint64_t queue_bytes_ = 0;
  std::vector<RateStage> nic_out_, nic_in_;
  std::vector<PathSpec> paths_;         // [from * hosts + to], scaled.
  std::vector<int> path_stage_;         // [from * hosts + to] -> index into path_stages_.
  std::vector<RateStage> path_stages_;  // One per ordered region pair.
  std::map<std::tuple<int, int, uint64_t>, RateStage> flows_;
  std::vector<absl::Time> last_release_;  // [from * hosts + to]
  std::vector<Counters> counters_;
  std::mt19937_64 rng_;
};

}  // namespace hmc::wanem

#endif  // HMC_PERF_WANEM_LINK_MODEL_H_
