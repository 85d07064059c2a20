#ifndef HMC_COLLECTIVES_BUTTERFLY_H_
#define HMC_COLLECTIVES_BUTTERFLY_H_

#include <cstddef>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "collectives/codecs/codec.h"
#include "collectives/collective_context.h"
#include "collectives/partition.h"
#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// One segment of a result as the wire carried it: its elements and its encoding.
struct EncodedPiece {
  Range range;
  const uint8_t* bytes;  // Scratch memory of the call.
  size_t size;
};

// The codecs of one call. Null means raw bytes.
struct LinkCodecs {
  // What this rank sends to each peer (indexed by rank in the context) in the reduce-scatter.
  // Links are symmetric: the peer uses the same codec towards this rank.
  std::vector<const Codec*> for_peer;
  // Each owner's reduced part in the all-gather: one encoding that every receiver decodes alike.
  const Codec* gather = nullptr;
  CodecFeedback* feedback = nullptr;  // May be null: no error feedback.
  size_t feedback_key_base = 0;       // Added to keys: where this vector starts in the tensor.
  // Where `gather` is used and this is set, every part's encoded result, in element order (its
  // decoding is what this rank holds), for relaying further as bytes.
  std::vector<EncodedPiece>* results = nullptr;
};

// Whether codecs can carry a reduction: lossy f32 values only add up (sum or average).
bool CodecsApply(DType dtype, ReduceOp op);

// Butterfly (direct) all-reduce: rank r owns `parts[r]` of the vector (parts may differ in size,
// and be empty); every rank sends each owner its contribution to that part, the owner reduces
// it, then sends the result to every rank. Each message travels one hop, as a pipeline of
// chunk-sized segments. With codecs (only where CodecsApply), contributions are encoded per link,
// and each owner encodes its result once, relays those bytes, and itself keeps
// decode(encode(result)), so all ranks end bit-identical.
//
// With `pace_links`, the links share this rank's measured sending rate in proportion to their
// bytes (CollectiveContext::PaceSends). The hierarchical plan's cross-zone exchange paces: one
// holder per zone, each sending and receiving alike, where unpaced the long round trips lost the
// NIC's queue to the short ones. A flat butterfly does not: paced by its own rate alone, a sender
// ignores what its receivers' NICs take, and on the emulated multicloud-us (NICs of 239-381
// Mbit/s) paced flat butterflies took 1.08-1.55x as long, with no gain in one zone
// (perf/RESULTS.md).
absl::Status ButterflyAllReduce(CollectiveContext& ctx, const void* in, void* out, size_t count,
                                DType dtype, ReduceOp op, const std::vector<Range>& parts,
                                const LinkCodecs& codecs, bool pace_links);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_BUTTERFLY_H_
