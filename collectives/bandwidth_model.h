#ifndef HMC_COLLECTIVES_BANDWIDTH_MODEL_H_
#define HMC_COLLECTIVES_BANDWIDTH_MODEL_H_

#include <cstddef>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "collectives/link_probe.h"

namespace hmc {

// Where nothing was measured (a link inside a host, or no probe): a link inside a data centre.
inline constexpr double kUnmeasuredLatencyS = 50e-6;
inline constexpr double kUnmeasuredBytesPerS = 1e9;

// What the probe's matrix says one large all-reduce of `bytes` takes with `algorithm`: for each
// of its phases, the bytes the busiest NIC sends or receives over that NIC's measured rate (the
// sum of its links': bandwidth_model.cc), plus the phase's latencies (half the longest round trip
// among its links each). Raw bytes: codecs shrink every candidate's cross-zone bytes alike. Ring
// runs in rank order; hierarchical as collectives/hierarchical.cc (ring inside each zone,
// butterflies across, a gather in the zone); butterfly with `shares`; one-shot up to
// kMaxEarlyBytes, where its data rides on the argument check's exchange, so that its one latency
// includes the check's (the others' times leave out the check they wait for). Empty for an
// unmeasured matrix or an algorithm it does not model (halving-doubling, which the tuner models
// in its rule 2).
std::optional<double> ModelledAllReduceSeconds(absl::string_view algorithm, size_t bytes,
                                               const std::vector<int>& zone_of,
                                               const std::vector<double>& shares,
                                               const LinkMatrix& links);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_BANDWIDTH_MODEL_H_
