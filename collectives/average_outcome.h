#ifndef HMC_COLLECTIVES_AVERAGE_OUTCOME_H_
#define HMC_COLLECTIVES_AVERAGE_OUTCOME_H_

// What Communicator::Average takes and gives, and the error of a call that a membership change
// ended: the public part of averaging.h and state_transfer.h.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "collectives/work.h"
#include "core/buffer.h"

namespace hmc {

// Named host tensors with the same names, types and counts on every member.
struct SharedState {
  std::vector<std::pair<std::string, Buffer>> tensors;

  size_t bytes() const;
  // Of the names, types and counts (not the values); 0 for no tensors.
  uint64_t Fingerprint() const;
};

// What one member's download did.
struct StateDownload {
  uint64_t bytes = 0;                // Downloaded.
  int parts = 0;                     // Parts of the state.
  int parts_downloaded = 0;          // Those fetched; the others matched already.
  std::vector<int> sources;          // Members (ranks of the call) it fetched from.
  std::vector<uint64_t> bytes_from;  // How much from each of them.
  absl::Duration time;               // Hashing included.
};

// A committed averaging round.
struct AverageOutcome {
  uint64_t round = 0;             // Rounds committed before this one.
  uint32_t epoch = 0;             // The epoch its committed attempt ran in.
  int attempts = 0;               // Attempts it took on this rank.
  std::vector<int> contributors;  // Stable ids, ascending.
  std::vector<double> weights;    // Each contributor's weight.
  double total_weight = 0;        // Their sum, what the average divides by.
  StateDownload state_download;   // A stale rank's download of the members' state.
  CollectiveReport report;        // Of the attempt that committed.
};

// "MembershipChanged: epoch 3 -> 4: ...; retry": a call that ended because the membership
// changed. Its code is Aborted; IsMembershipChanged tells it from other aborts.
absl::Status MembershipChangedError(uint32_t from, uint32_t to, const std::string& cause);
bool IsMembershipChanged(const absl::Status& status);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_AVERAGE_OUTCOME_H_
