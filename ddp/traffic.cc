#include "ddp/traffic.h"

namespace hmc::ddp {

Traffic Traffic::operator-(const Traffic& earlier) const {
  return {calls - earlier.calls, bytes_sent - earlier.bytes_sent,
          bytes_sent_across_zones - earlier.bytes_sent_across_zones,
          egress_usd - earlier.egress_usd};
}

void TrafficMeter::Add(const CollectiveReport& report) {
  MutexLock lock(&mu_);
  ++totals_.calls;
  totals_.bytes_sent += report.bytes_sent;
  totals_.bytes_sent_across_zones += report.bytes_sent_across_zones;
  totals_.egress_usd += report.egress_usd;
}

Traffic TrafficMeter::totals() const {
  MutexLock lock(&mu_);
  return totals_;
}

}  // namespace hmc::ddp
