#include "collectives/host_collectives.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/host_reduce.h"
#include "collectives/partition.h"
#include "collectives/ring.h"

namespace hmc {
size_t RingSegmentElems(size_t chunk_bytes, DType type) {
  return std::max<size_t>(1, chunk_bytes / DTypeSize(type));
}

RingFirstStep RingFirstStepOf(int rank, int size, size_t count, DType dtype, size_t chunk_bytes) {
  if (AccumulatorType(dtype) != dtype) return {};
  return {BlockOf(count, size, (rank + size - 1) % size), RingSegmentElems(chunk_bytes, dtype)};
}

Accumulation PrepareAccumulation(CollectiveContext& ctx, const void* in, void* out, size_t count,
                                 DType dtype) {
  const DType type = AccumulatorType(dtype);
  Accumulation a{type, DTypeSize(type), static_cast<const uint8_t*>(in),
                 static_cast<uint8_t*>(out)};
  if (type != dtype) {
    a.acc = ctx.Scratch(count * a.element_bytes);
    ToAccumulator(a.acc, in, count, dtype);
    a.src = a.acc;
  }
  return a;
}

absl::Status RingAllReduce(CollectiveContext& ctx, const void* in, void* out_ptr, size_t count,
                           DType dtype, ReduceOp op, const EarlyData* early) {
  const int n = ctx.size();
  const auto [acc_type, es, src, acc] = PrepareAccumulation(ctx, in, out_ptr, count, dtype);
  const size_t out_es = DTypeSize(dtype);
  auto* out = static_cast<uint8_t*>(out_ptr);
  std::vector<Range> blocks;
  for (int b = 0; b < n; ++b) blocks.push_back(BlockOf(count, n, b));
  const size_t segment = RingSegmentElems(ctx.chunk_bytes(), acc_type);
  RingAllGather gather(ctx, out, out_es, blocks, segment);
  gather.PostReceives();
  absl::Status reduced = RingReduceScatter(
      ctx, src, acc, acc_type, op, blocks, segment,
      [&, acc = acc, es = es](Range seg) {  // clang 14: bindings by name.
        FinalizeReduction(out + seg.begin * out_es, acc + seg.begin * es, seg.count, dtype, op, n);
        gather.SendOwnSegment();
      },
      early != nullptr ? early->rest_sends : std::vector<CollectiveContext::Pending>{});
  if (!reduced.ok()) return reduced;
  return gather.Finish();
}

absl::Status RingReduceScatterBlocks(CollectiveContext& ctx, const void* in, void* out,
                                     size_t count, DType dtype, ReduceOp op) {
  const int n = ctx.size();
  const DType acc_type = AccumulatorType(dtype);
  const size_t es = DTypeSize(acc_type);
  const size_t total = count * n;
  uint8_t* acc = ctx.Scratch(total * es);
  const uint8_t* src = static_cast<const uint8_t*>(in);
  if (acc_type != dtype) {
    ToAccumulator(acc, in, total, dtype);
    src = acc;
  }
  std::vector<Range> blocks;
  for (int b = 0; b < n; ++b) blocks.push_back(Range{b * count, count});
  const size_t own_begin = blocks[ctx.rank()].begin;
  auto* dst = static_cast<uint8_t*>(out);
  return RingReduceScatter(ctx, src, acc, acc_type, op, blocks,
                           RingSegmentElems(ctx.chunk_bytes(), acc_type), [&](Range seg) {
                             FinalizeReduction(dst + (seg.begin - own_begin) * DTypeSize(dtype),
                                               acc + seg.begin * es, seg.count, dtype, op, n);
                           });
}

absl::Status RingAllGatherBlocks(CollectiveContext& ctx, const void* in, void* out_ptr,
                                 size_t count, DType dtype) {
  const int n = ctx.size();
  const size_t es = DTypeSize(dtype);
  auto* out = static_cast<uint8_t*>(out_ptr);
  uint8_t* own = out + ctx.rank() * count * es;
  if (own != in && count > 0) std::memmove(own, in, count * es);
  std::vector<Range> blocks;
  for (int b = 0; b < n; ++b) blocks.push_back(Range{b * count, count});
  RingAllGather gather(ctx, out, es, blocks, RingSegmentElems(ctx.chunk_bytes(), dtype));
  gather.PostReceives();
  for (size_t k = 0; k < gather.own_segments(); ++k) gather.SendOwnSegment();
  return gather.Finish();
}

}  // namespace hmc
