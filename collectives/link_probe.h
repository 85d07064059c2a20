#ifndef HMC_COLLECTIVES_LINK_PROBE_H_
#define HMC_COLLECTIVES_LINK_PROBE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hmc {

// What the probe measured between every pair of ranks: the round trip, and the rate each link
// carried while every link carried data at once, as in a butterfly all-reduce (so the rates
// already include what links that share a NIC or a path take from each other). Each rank measures
// its incoming links; the rows are shared through the coordinator, so every rank holds the same
// matrix and takes the same decisions from it. Links inside a host are not measured (rate 0).
struct LinkMatrix {
  int size = 0;
  std::vector<double> rtt_ms;  // [from * size + to]
  std::vector<double> mbit;    // [from * size + to]: the rate from -> to.
  // How fast the slowest rank encodes with the codec that `codec_*=auto` picks (kAutoCodec),
  // bytes/s on one core: the tuner weighs it against the links.
  double auto_codec_bytes_per_s = 0;

  bool measured() const { return size > 0; }
  double rtt(int from, int to) const { return rtt_ms[from * size + to]; }
  double rate(int from, int to) const { return mbit[from * size + to]; }
  // Each rank's bandwidth for the share solver: the smaller of its measured outgoing and incoming
  // totals, Mbit/s; 0 where none of its links was measured.
  std::vector<double> PeerBandwidth() const;
  // The slowest measured rate between ranks of different zones (zone_of[rank]), and the rate of
  // the slowest link inside a zone; 0 where there is none.
  double SlowestRate(const std::vector<int>& zone_of, bool across_zones) const;
  double LongestRtt() const;

  // One rank's measured incoming row (rtt and rate from every rank to `rank`), as text for the
  // coordinator's key-value store, and back into this matrix.
  std::string SerializeRow(int rank) const;
  absl::Status ParseRow(int rank, absl::string_view text);
  // Two tables (RTT ms, Mbit/s), rows by sender, for `hmc-perf --probe`.
  std::string ToTable() const;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_LINK_PROBE_H_
