#ifndef HMC_PERF_WANEM_TOPOLOGY_H_
#define HMC_PERF_WANEM_TOPOLOGY_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hmc::wanem {

// An emulated network: hosts in regions, and per ordered pair of regions the path between them.
// Text format: one statement per line, '#' starts a comment.
//
//   scale 0.1
//       Every rate is multiplied by this (to fit a topology to a machine).
//   queue 2MiB
//       Backlog each shaping stage holds before it drops (default 4MiB).
//   police
//       Every path's `flow` cap is a policer (as `police` on each path).
//   include us-eu.topo
//       The statements of another file (its name relative to this one's directory), here;
//       only in files (LoadTopology): a policed form of a topology is that topology plus `police`.
//   region us cloud=gc nic=10Gbit
//       A region; its hosts' NIC rate (default: unlimited).
//   host us-0 region=us [nic=1Gbit]
//       A host; its own NIC rate overrides the region's.
//   path us eu rtt=103.2ms capacity=6198Mbit flow=211Mbit [loss=0.1%] [jitter=1ms] [oneway]
//        [police]
//       The path between two regions, shared by all their hosts; `flow` caps one TCP flow. The
//       cap shapes (a FIFO of about one bandwidth-delay product in front of the rate) unless
//       `police`: then it is a token bucket of one bandwidth-delay product that passes what
//       conforms at once and drops the rest, as clouds' per-flow policers do.
//
// A path applies in both directions unless `oneway` (then write the other direction too); every
// pair of regions that hosts talk across, including a region with itself, needs a path. Rates take
// bit, Kbit, Mbit or Gbit (per second); sizes B, KiB, MiB; times us, ms or s; loss a fraction or %.
struct PathSpec {
  absl::Duration rtt;
  double capacity_bps = 0;  // Whole path, all flows together.
  double flow_bps = 0;      // One TCP flow (5-tuple): what a single stream can reach.
  double loss = 0;          // Probability a packet is dropped.
  absl::Duration jitter;    // Extra one-way delay, uniform in [0, jitter); never reorders.
  bool police = false;      // The flow cap drops instead of queueing.
};

struct Region {
  std::string name;
  std::string cloud;
  double nic_bps = 0;  // 0: unlimited.
};

struct Host {
  std::string name;
  std::string region;
  double nic_bps = 0;  // 0: unlimited.
};

struct Topology {
  double scale = 1;
  uint64_t queue_bytes = 4 << 20;
  bool police = false;  // Every path's flow cap polices.
  std::vector<Region> regions;
  std::vector<Host> hosts;
  std::map<std::pair<std::string, std::string>, PathSpec> paths;  // (from region, to region)

  const Region* FindRegion(absl::string_view name) const;
  const Host* FindHost(absl::string_view name) const;
  // The path from one host's region to another's, scaled; error if the topology has none.
  absl::StatusOr<PathSpec> PathBetween(const Host& from, const Host& to) const;
  // A host's NIC rate (host, else region), scaled; 0 for unlimited.
  double NicBps(const Host& host) const;
};

// Parses topology text; `origin` (a file name) prefixes every error with the line number. Text
// given here may not include files.
absl::StatusOr<Topology> ParseTopology(absl::string_view text, absl::string_view origin);
absl::StatusOr<Topology> LoadTopology(const std::string& path);

// Unit parsers, exposed for tests.
absl::StatusOr<double> ParseRate(absl::string_view text);
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);
absl::StatusOr<absl::Duration> ParseTime(absl::string_view text);

}  // namespace hmc::wanem

#endif  // HMC_PERF_WANEM_TOPOLOGY_H_
