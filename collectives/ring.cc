#include "collectives/ring.h"

#include <algorithm>
#include <utility>

#include "collectives/host_reduce.h"

namespace hmc {
namespace {
int Mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

absl::Status RingReduceScatter(CollectiveContext& ctx, const uint8_t* src, uint8_t* acc,
                               DType acc_type, ReduceOp op, const std::vector<Range>& blocks,
                               size_t segment_elems, const std::function<void(Range)>& on_final,
                               std::vector<CollectiveContext::Pending> sent_early) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return absl::OkStatus();
  const size_t es = DTypeSize(acc_type);
  const int next = Mod(r + 1, n);
  const int prev = Mod(r - 1, n);
  // At step s rank r sends block r-s-1 and receives block r-s-2; after n-1 steps it owns block r.
  auto sent_at = [&](int s) { return Mod(r - s - 1, n); };
  auto received_at = [&](int s) { return Mod(r - s - 2, n); };
  size_t largest = 0;
  for (const Range& b : blocks) largest = std::max(largest, b.count);
  // Every step's receives are posted up front, each into its own staging block, so data never
  // waits in the transport's unexpected-message memory (which costs a copy and page faults).
  std::vector<uint8_t*> staging(n - 1);
  std::vector<std::vector<CollectiveContext::Pending>> receives(n - 1);
  for (int s = 0; s <= n - 2; ++s) {
    staging[s] = ctx.Scratch(largest * es);
    const Range block = blocks[received_at(s)];
    uint32_t k = 0;
    for (const Range& seg : Segments(block, segment_elems)) {
      receives[s].push_back(ctx.Recv(prev, Phase::kReduceScatter, s, k++,
                                     staging[s] + (seg.begin - block.begin) * es, seg.count * es));
    }
  }
  const std::vector<Range> first = Segments(blocks[sent_at(0)], segment_elems);
  std::vector<CollectiveContext::Pending> sends = std::move(sent_early);
  for (size_t k = sends.size(); k < first.size(); ++k) {
    sends.push_back(ctx.Send(next, Phase::kReduceScatter, 0, static_cast<uint32_t>(k),
                             src + first[k].begin * es, first[k].count * es));
  }
  for (int s = 0; s <= n - 2; ++s) {
    const Range block = blocks[received_at(s)];
    const std::vector<Range> segments = Segments(block, segment_elems);
    for (size_t i = 0; i < segments.size(); ++i) {
      const Range& seg = segments[i];
      if (absl::Status st = ctx.Wait(receives[s][i]); !st.ok()) return st;
      ReduceHost(acc + seg.begin * es, src + seg.begin * es,
                 staging[s] + (seg.begin - block.begin) * es, seg.count, acc_type, op);
      if (s + 1 <= n - 2) {
        sends.push_back(ctx.Send(next, Phase::kReduceScatter, s + 1, static_cast<uint32_t>(i),
                                 acc + seg.begin * es, seg.count * es));
      } else {
        on_final(seg);
      }
    }
  }
  return ctx.WaitAll(sends);
}

RingAllGather::RingAllGather(CollectiveContext& ctx, uint8_t* out, size_t element_bytes,
                             const std::vector<Range>& blocks, size_t segment_elems)
    : ctx_(ctx),
      out_(out),
      element_bytes_(element_bytes),
      blocks_(blocks),
      segment_elems_(segment_elems),
      own_(Segments(blocks[ctx.rank()], segment_elems)) {}

int RingAllGather::BlockReceivedAt(int step) const {
  return Mod(ctx_.rank() - step - 1, ctx_.size());
}

void RingAllGather::PostReceives() {
  const int n = ctx_.size();
  const int prev = Mod(ctx_.rank() - 1, n);
  receives_.assign(std::max(0, n - 1), {});
  for (int s = 0; s <= n - 2; ++s) {
    uint32_t k = 0;
    for (const Range& seg : Segments(blocks_[BlockReceivedAt(s)], segment_elems_)) {
      receives_[s].push_back(ctx_.Recv(prev, Phase::kAllGather, s, k++,
                                       out_ + seg.begin * element_bytes_,
                                       seg.count * element_bytes_));
    }
  }
}

void RingAllGather::SendOwnSegment() {
  if (ctx_.size() == 1) return;
  const uint32_t k = own_sent_++;
  const Range& seg = own_[k];
  sends_.push_back(ctx_.Send(Mod(ctx_.rank() + 1, ctx_.size()), Phase::kAllGather, 0, k,
                             out_ + seg.begin * element_bytes_, seg.count * element_bytes_));
}

absl::Status RingAllGather::Finish() {
  const int n = ctx_.size();
  const int next = Mod(ctx_.rank() + 1, n);
  for (int s = 0; s <= n - 2; ++s) {
    const std::vector<Range> segments = Segments(blocks_[BlockReceivedAt(s)], segment_elems_);
    for (size_t i = 0; i < segments.size(); ++i) {
      if (absl::Status st = ctx_.Wait(receives_[s][i]); !st.ok()) return st;
      if (s + 1 <= n - 2) {
        const Range& seg = segments[i];
        sends_.push_back(ctx_.Send(next, Phase::kAllGather, s + 1, static_cast<uint32_t>(i),
                                   out_ + seg.begin * element_bytes_, seg.count * element_bytes_));
      }
    }
  }
  return ctx_.WaitAll(sends_);
}

}  // namespace hmc
