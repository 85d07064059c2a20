#ifndef HMC_DDP_TRAFFIC_H_
#define HMC_DDP_TRAFFIC_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "collectives/work.h"
#include "core/mutex.h"

namespace hmc::ddp {

// What a run's collectives sent, summed over calls: the per-run egress account that the
// training examples print per epoch.
struct Traffic {
  uint64_t calls = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_sent_across_zones = 0;
  double egress_usd = 0;

  Traffic operator-(const Traffic& earlier) const;
};

// Thread-safe accumulator of collective reports.
class TrafficMeter {
 public:
  void Add(const CollectiveReport& report);
  Traffic totals() const;

 private:
  mutable Mutex mu_;
  Traffic totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hmc::ddp

#endif  // HMC_DDP_TRAFFIC_H_
