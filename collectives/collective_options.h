#ifndef HMC_COLLECTIVES_COLLECTIVE_OPTIONS_H_
#define HMC_COLLECTIVES_COLLECTIVE_OPTIONS_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/option_table.h"

namespace hmc {

// The collectives' tunables: the all-reduce's plan (algorithm, codecs, shares, probe, trials,
// pacing, segments), the argument check, the workers, where the rank's threads run, how many
// ranks the group goes on with, and a call's default deadline. Named as every option is
// (core/option_table.h); Table() documents each one.
struct CollectiveOptions {
  std::string algo = "auto";         // auto or a name of collectives/allreduce_algorithms.h.
  std::string codec_inter = "none";  // Codec on links between zones; auto: the tuner's choice.
  std::string codec_intra = "none";  // Codec on links inside a zone.
  std::string shares = "auto";       // Butterfly shares: auto, equal or one weight per rank.
  bool probe = true;                 // Measure every link at creation.
  bool explore = true;               // Auto all-reduces try each candidate algorithm first.
  bool pace_sends = true;            // Cross-zone sends share the measured rate.
  std::string prices;                // Egress price table file; empty: the built-in one.
  int64_t small_message_bytes = 256 << 10;
  int64_t chunk_bytes = 2 << 20;  // Pipeline segment.
  bool check_args = true;
  // How the check's descriptors reach every member: auto, direct or forwarded (arg_check.h).
  std::string check_exchange = "auto";
  int64_t workers = 2;  // Threads that run collectives (several may be in flight).
  // How long a collective is left for the thread that will wait for it before a worker runs it.
  absl::Duration waiter_grace = absl::Milliseconds(1);
  bool bind = true;        // Pin hmc's threads near the NIC, local ranks spread (core/placement.h).
  int64_t local_rank = 0;  // Among the ranks on this machine (hmcrun sets both).
  int64_t local_size = 1;
  int64_t min_ranks = 1;  // The group goes on after failures while this many ranks live.
  absl::Duration timeout = absl::Minutes(5);  // Default deadline of one collective.

  static std::span<const OptionSpec<CollectiveOptions>> Table();
  absl::Status Validate() const;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_COLLECTIVE_OPTIONS_H_
