#ifndef HMC_COLLECTIVES_ALLREDUCE_ALGORITHMS_H_
#define HMC_COLLECTIVES_ALLREDUCE_ALGORITHMS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "collectives/arg_check.h"
#include "collectives/codecs/codec.h"
#include "collectives/collective_context.h"
#include "core/buffer.h"
#include "core/reduce_op.h"

namespace hmc {

// What one all-reduce gives its algorithm: the data, the plan's choices and the group's zones.
struct AllReduceArgs {
  const void* in;
  void* out;
  size_t count;
  DType dtype;
  ReduceOp op;
  const std::vector<int>& zone_of;    // Zone index of every rank of the group.
  const std::vector<double>& shares;  // Butterfly: each rank's weight.
  const Codec* inter;                 // Codec on links between zones; null: none.
  const Codec* intra;                 // Codec on links inside a zone; null: none.
  CodecFeedback* feedback;            // Error feedback for lossy codecs; may be null.
  // What left with the argument check (arg_check.h); null: no check ran.
  const EarlyData* early;
};

// A call of two or more ranks as an algorithm's early data sees it (chunk_bytes: the plan's
// pipeline segment, the one its run gets).
struct EarlyCall {
  int rank;
  int size;
  size_t count;
  DType dtype;
  size_t chunk_bytes;
};

// What of a call's input leaves with the argument check, before its verdict (arg_check.h, early
// data): `bytes` from `offset`, to the member `to` (-1: every member) as messages of
// `segment_bytes` (0: one), tagged (phase, 0, k) for the k-th beyond what rides.
struct EarlyPart {
  size_t offset = 0;
  size_t bytes = 0;
  int to = -1;
  size_t segment_bytes = 0;
  Phase phase = Phase::kOneShot;
};

// One all-reduce algorithm: the one table that options, the tuner, the trials, dispatch, the
// argument check's messages and the tests read.
struct AllReduceAlgorithm {
  absl::string_view name;  // As `algo` names it.
  // In every call's descriptor (arg_check.h): ranks running different algorithms meet as a
  // mismatch, not as garbage. Fixed per name; never reuse one.
  uint8_t wire_id;
  absl::string_view summary;  // For --help and error messages.
  // PlanTrials may time it against the others: its messages cannot meet theirs. Halving-doubling
  // and one-shot use tags of their own phases that a candidate's would meet.
  bool raced;
  bool needs_zones_with_several_ranks;  // Hierarchical: inside each zone, then across.
  absl::Status (*run)(CollectiveContext& ctx, const AllReduceArgs& args);
  // What of a call's first messages may leave with the argument check (at most kMaxEarlyBytes);
  // null, or nothing returned: none. The run finds what left in AllReduceArgs::early.
  std::optional<EarlyPart> (*early)(const EarlyCall& call) = nullptr;
};

std::span<const AllReduceAlgorithm> AllReduceAlgorithms();
// Null where no algorithm has that name (or wire id).
const AllReduceAlgorithm* FindAllReduceAlgorithm(absl::string_view name);
const AllReduceAlgorithm* FindAllReduceAlgorithm(uint8_t wire_id);
// "ring, halving_doubling, ...": the names, in the table's order.
std::string AllReduceAlgorithmNames();
// `algo` as an option: auto or a name of the table; otherwise an error that lists them.
absl::Status CheckAllReduceAlgorithmOption(absl::string_view algo);
// The option's help: one line per algorithm.
std::string DescribeAllReduceAlgorithms();

}  // namespace hmc

#endif  // HMC_COLLECTIVES_ALLREDUCE_ALGORITHMS_H_
