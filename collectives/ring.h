#ifndef HMC_COLLECTIVES_RING_H_
#define HMC_COLLECTIVES_RING_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "collectives/collective_context.h"
#include "collectives/partition.h"
#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// Pipelined ring reduce-scatter. `blocks[b]` is block b's element range; rank r ends owning block
// r, reduced in `acc`. `src` holds this rank's contributions and `acc` receives partial sums
// (they may be the same buffer), both in `acc_type`. Each block moves as segments of
// `segment_elems`; a segment is forwarded as soon as it is reduced, so step s+1 overlaps step s.
// `on_final` runs for each segment of block r once it holds every contribution. `sent_early`: the
// sends of the first step's leading segments, where they left before the call ran (with the
// argument check).
absl::Status RingReduceScatter(CollectiveContext& ctx, const uint8_t* src, uint8_t* acc,
                               DType acc_type, ReduceOp op, const std::vector<Range>& blocks,
                               size_t segment_elems, const std::function<void(Range)>& on_final,
                               std::vector<CollectiveContext::Pending> sent_early = {});

// Pipelined ring all-gather of `blocks` in `out`: rank r contributes block r, every other block
// is received straight into `out` and relayed byte for byte, so all ranks end bit-identical.
class RingAllGather {
 public:
  RingAllGather(CollectiveContext& ctx, uint8_t* out, size_t element_bytes,
                const std::vector<Range>& blocks, size_t segment_elems);
  // Posts a receive for every segment of every other block.
  void PostReceives();
  // Sends the next segment of this rank's block (call once per segment, in order).
  void SendOwnSegment();
  size_t own_segments() const { return own_.size(); }
  // Relays each received segment onward, then waits for every send.
  absl::Status Finish();

 private:
  int BlockReceivedAt(int step) const;

  CollectiveContext& ctx_;
  uint8_t* out_;
  const size_t element_bytes_;
  const std::vector<Range>& blocks_;
  const size_t segment_elems_;
  std::vector<Range> own_;
  uint32_t own_sent_ = 0;
  std::vector<std::vector<CollectiveContext::Pending>> receives_;
  std::vector<CollectiveContext::Pending> sends_;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_RING_H_
