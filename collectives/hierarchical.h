#ifndef HMC_COLLECTIVES_HIERARCHICAL_H_
#define HMC_COLLECTIVES_HIERARCHICAL_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "collectives/butterfly.h"
#include "collectives/collective_context.h"
#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

// How the hierarchical all-reduce cuts a group: zones in order of their first rank, members in
// rank order, S shards (S the size of the largest zone), local rank j of a zone of m holding
// shards [j·S/m, (j+1)·S/m).
struct ZoneLayout {
  explicit ZoneLayout(const std::vector<int>& zone_of);
  static std::pair<int, int> ShardsOf(int j, int m, int shards);
  int Holder(size_t zone, int shard) const;  // The rank of zones[zone] that holds `shard`.
  size_t ZoneIndexOf(int rank) const;

  std::vector<std::vector<int>> zones;
  int shards = 0;
};

// Zone-aware all-reduce: reduce-scatter inside each zone, then the ranks that hold the same shard
// in different zones all-reduce it across zones (in parallel, so every cross-zone link carries a
// 1/k share), then all-gather inside each zone. The vector is cut into S shards, S the size of the
// largest zone; in a zone of m ranks, local rank j holds shards [j·S/m, (j+1)·S/m), so zones of
// uneven size work (a rank of a small zone holds several shards and joins one cross-zone group
// per shard, in shard order). `zone_of[r]` is rank r's zone, any small integer. The cross-zone
// step is a butterfly among the shard's holders (one hop over the long links), its messages
// encoded with `inter_codec` where codecs apply (null: raw). Partial sums stay in the
// accumulator type until the cross-zone step ends; then each shard is rounded once and relayed as
// bytes, so every rank ends bit-identical.
absl::Status HierarchicalAllReduce(CollectiveContext& ctx, const std::vector<int>& zone_of,
                                   const void* in, void* out, size_t count, DType dtype,
                                   ReduceOp op, const Codec* inter_codec = nullptr,
                                   CodecFeedback* feedback = nullptr);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_HIERARCHICAL_H_
