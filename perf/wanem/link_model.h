#ifndef HMC_PERF_WANEM_LINK_MODEL_H_
#define HMC_PERF_WANEM_LINK_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "perf/wanem/topology.h"

namespace hmc::wanem {

// One shaping stage: a link of `bits_per_second` fed by a FIFO that holds at most `queue_bytes`,
// or, policing, a token bucket of `queue_bytes` filled at that rate: a packet passes at once
// while the bucket holds its size, and is dropped otherwise (nothing waits). It works in virtual
// time: a packet's departure is computed when it arrives, which is exact as long as arrivals are
// presented in time order. A rate of 0 is unlimited.
class RateStage {
 public:
  RateStage(double bits_per_second, uint64_t queue_bytes, bool police = false)
      : bytes_per_second_(bits_per_second / 8),
        queue_bytes_(queue_bytes),
        police_(police),
        tokens_(static_cast<double>(queue_bytes)) {}
  // When the packet has left the stage, or nullopt if the queue is full (a tail drop) or, policing,
  // the bucket is short of the packet.
  std::optional<absl::Time> Pass(absl::Time arrival, uint64_t bytes);
  // When the stage last let a packet through or will have sent its queue.
  absl::Time free_at() const { return free_at_; }
  void SetRate(double bits_per_second) { bytes_per_second_ = bits_per_second / 8; }

 private:
  double bytes_per_second_;
  uint64_t queue_bytes_;
  bool police_;
  double tokens_;  // Policing: bytes the bucket holds at free_at_.
  absl::Time free_at_ = absl::InfinitePast();
};

// The fate of packets crossing an emulated topology. A packet from host A to host B passes, in
// order: A's NIC, its flow's cap (what one TCP stream reaches on that path: 5-tuple flows are
// shaped separately, as a window limit would), the path between the two regions (shared by every
// host pair of those regions), B's NIC; then it travels half the RTT plus jitter, and it may be
// lost at random. Packets of one flow are never reordered.
//
// The stages form a pipeline driven by events in time order: a packet enters the next stage only
// when it leaves the previous one, so every stage sees its arrivals in time order and its FIFO
// stays exact even where flows with different backlogs merge.
class LinkModel {
 public:
  struct Counters {
    uint64_t packets = 0;
    uint64_t bytes = 0;
    uint64_t queue_drops = 0;
    uint64_t random_losses = 0;
  };
  // A packet's fate: delivered to its host at `release`, or dropped by a full queue.
  struct Outcome {
    uint64_t id;
    bool dropped;
    absl::Time release;
  };

  // Hosts are indexes into topology.hosts. Every needed path must exist (checked here). `mtu` is
  // the emulated interfaces' (it sizes the smallest per-flow queue).
  static absl::StatusOr<LinkModel> Create(const Topology& topology, uint64_t seed, int mtu = 1500);

  // A packet sent at `now`; returns its id (ids start at 1), or 0 if it was lost at once.
  uint64_t Admit(int from, int to, uint64_t flow, uint64_t bytes, absl::Time now);
  // Moves packets through the stages up to `now`, appending the fate of each that left the last
  // stage or was dropped.
  void Advance(absl::Time now, std::vector<Outcome>* outcomes);
  // Changes one host pair's path while it runs (hmc-wanem cut/heal/degrade): `loss`, when not
  // negative, replaces its random loss (1 cuts it), and `flow_bps`, when above 0, caps each of its
  // flows (flows already running included). ClearOverrides restores every path of the topology.
  void Override(int from, int to, double loss, double flow_bps);
  void ClearOverrides();
  // When the next packet leaves a stage, if any is inside.
  std::optional<absl::Time> NextEvent() const;
  const Counters& counters(int from, int to) const { return counters_[from * hosts_ + to]; }

 private:
  LinkModel() = default;

  struct Flow {
    RateStage cap;
    absl::Time last_release = absl::InfinitePast();  // Jitter never reorders a flow.
    int in_pipeline = 0;                             // Not forgotten while packets are inside.
  };
  // A packet about to enter `stage` (0: source NIC ... 3: destination NIC) at `time`.
  struct Event {
    absl::Time time;
    uint64_t id;  // Also the tie-break: arrival order.
    int stage;
    int from, to;
    uint64_t bytes;
    Flow* flow;
    bool operator>(const Event& other) const {
      return time != other.time ? time > other.time : id > other.id;
    }
  };

  RateStage& StageOf(const Event& e);
  // The queue in front of one flow's cap.
  uint64_t FlowQueueBytes(const PathSpec& path) const;

  int hosts_ = 0;
  uint64_t mtu_ = 1500;
  uint64_t queue_bytes_ = 0;
  std::vector<RateStage> nic_out_, nic_in_;
  std::vector<PathSpec> paths_;           // [from * hosts + to], scaled, with overrides.
  std::vector<PathSpec> topology_paths_;  // The same without overrides.
  std::vector<int> path_stage_;           // [from * hosts + to] -> index into path_stages_.
  std::vector<RateStage> path_stages_;    // One per ordered region pair.
  std::map<std::tuple<int, int, uint64_t>, Flow> flows_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::vector<Counters> counters_;
  uint64_t next_id_ = 1;
  std::mt19937_64 rng_;
};

}  // namespace hmc::wanem

#endif  // HMC_PERF_WANEM_LINK_MODEL_H_
