#ifndef HMC_COLLECTIVES_STATE_TRANSFER_H_
#define HMC_COLLECTIVES_STATE_TRANSFER_H_

// State download for ranks that join a running group (Communicator::Average's `state`).
//
// Members keep some tensors identical: parameters, optimizer state, a step counter. A rank that
// joined holds stale ones, so in the first averaging round it takes part in, before the round's
// all-reduce, it downloads them from the members that hold them. The state is cut into parts
// (never across tensors); every holder hashes every part (SHA-256) and sends the list; the
// newcomer checks that the holders agree and fetches the parts, striped over the holders as fast
// as each delivers: every holder has two parts in flight, and gets the next one whenever one of
// its parts arrives. Every part it receives must match the agreed hash. When a holder's failure
// cut a download short, the round is retried in the next epoch and the download resumes: the
// newcomer hashes its own parts first, and those that match are not sent again.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "collectives/average_outcome.h"
#include "collectives/collective_context.h"
#include "core/buffer.h"

namespace hmc {

// A slice of one tensor of a SharedState.
struct StatePart {
  int tensor = 0;
  size_t offset = 0;  // Bytes into the tensor.
  size_t bytes = 0;
};

// The parts of `state`, each at most `part_bytes` long (every member cuts them alike).
std::vector<StatePart> SplitState(const SharedState& state, size_t part_bytes);
// How long parts are for `total` bytes striped over `sources` holders: a few parts per holder, so
// that a resumed download repeats little.
size_t StatePartBytes(size_t total, int sources);

// Within a call of the group: every member passes the same `stale` (by rank of the call). Members
// with `stale` set download `state` from the others; the others serve it. OK at once when no
// member is stale, or when every member is (nobody holds a state: each keeps its own). `resume`:
// this stale member tried before, so parts it holds may be right already (it hashes them first).
// `download` receives what this member fetched.
absl::Status TransferState(CollectiveContext& ctx, const std::vector<uint8_t>& stale,
                           const SharedState& state, bool resume, StateDownload* download);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_STATE_TRANSFER_H_
