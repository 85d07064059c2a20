#include "collectives/hierarchical.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_format.h"
#include "collectives/host_collectives.h"
#include "collectives/host_reduce.h"
#include "collectives/partition.h"
#include "collectives/ring.h"

namespace hmc {
namespace {

// Shards [first, last) held by local rank `j` of a zone of `m` ranks when there are `shards`.
std::pair<int, int> ShardsOf(int j, int m, int shards) {
  return {j * shards / m, (j + 1) * shards / m};
}

Range ElementsOf(size_t count, int shards, std::pair<int, int> held) {
  const Range first = BlockOf(count, shards, held.first);
  const Range last = BlockOf(count, shards, held.second - 1);
  return Range{first.begin, last.end() - first.begin};
}

// The zone's all-gather from encoded pieces: each rank sends its own pieces (their bytes as they
// crossed the zones) to every mate and decodes every mate's; `layout[k]` is mate k's pieces'
// element ranges. Rounding after decoding is the same everywhere, so all ranks end bit-identical.
absl::Status GatherEncodedInZone(CollectiveContext& zone,
                                 const std::vector<std::vector<Range>>& layout,
                                 const std::vector<EncodedPiece>& mine, const Codec& codec,
                                 uint8_t* out, DType dtype, ReduceOp op, int contributors) {
  const int m = zone.size();
  const size_t out_es = DTypeSize(dtype);
  std::vector<std::vector<CollectiveContext::Pending>> receives(m);
  std::vector<std::vector<uint8_t*>> slots(m);
  size_t largest = 0;
  for (int k = 0; k < m; ++k) {
    for (const Range& range : layout[k]) largest = std::max(largest, range.count);
    if (k == zone.rank()) continue;
    for (size_t i = 0; i < layout[k].size(); ++i) {
      const size_t capacity = codec.MaxEncodedBytes(layout[k][i].count);
      slots[k].push_back(zone.Scratch(capacity));
      receives[k].push_back(zone.RecvUpTo(k, Phase::kAllGather, 0, static_cast<uint32_t>(i),
                                          slots[k].back(), capacity));
    }
  }
  std::vector<CollectiveContext::Pending> sends;
  for (size_t i = 0; i < mine.size(); ++i) {
    for (int d = 1; d < m; ++d) {
      sends.push_back(zone.Send((zone.rank() + d) % m, Phase::kAllGather, 0,
                                static_cast<uint32_t>(i), mine[i].bytes, mine[i].size));
    }
  }
  auto* decoded = reinterpret_cast<float*>(zone.Scratch(largest * sizeof(float)));
  for (int d = 1; d < m; ++d) {
    const int k = (zone.rank() + d) % m;
    for (size_t i = 0; i < layout[k].size(); ++i) {
      const Range& range = layout[k][i];
      size_t received = 0;
      if (absl::Status s = zone.Wait(receives[k][i], &received); !s.ok()) return s;
      if (absl::Status s = codec.Decode(slots[k][i], received, decoded, range.count); !s.ok()) {
        return zone.PeerError(k, s);
      }
      FinalizeReduction(out + range.begin * out_es, decoded, range.count, dtype, op, contributors);
    }
  }
  return zone.WaitAll(sends);
}

}  // namespace

absl::Status HierarchicalAllReduce(CollectiveContext& ctx, const std::vector<int>& zone_of,
                                   const void* in, void* out_ptr, size_t count, DType dtype,
                                   ReduceOp op, const Codec* inter_codec, CodecFeedback* feedback) {
  // Zones in order of their first rank; members in rank order.
  std::vector<std::vector<int>> zones;
  std::map<int, size_t> zone_index;
  for (int r = 0; r < static_cast<int>(zone_of.size()); ++r) {
    auto [it, added] = zone_index.emplace(zone_of[r], zones.size());
    if (added) zones.emplace_back();
    zones[it->second].push_back(r);
  }
  const size_t my_zone = zone_index.at(zone_of[ctx.rank()]);
  const std::vector<int>& mates = zones[my_zone];
  const int m = static_cast<int>(mates.size());
  const int j = static_cast<int>(std::find(mates.begin(), mates.end(), ctx.rank()) - mates.begin());
  int shards = 0;
  for (const auto& z : zones) shards = std::max(shards, static_cast<int>(z.size()));
  const int zone_count = static_cast<int>(zones.size());
  if (shards >= 4096) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "hierarchical all-reduce: a zone of %d ranks exceeds the tag's step field", shards));
  }

  const auto [acc_type, es, src, acc] = PrepareAccumulation(ctx, in, out_ptr, count, dtype);
  const size_t out_es = DTypeSize(dtype);
  auto* out = static_cast<uint8_t*>(out_ptr);
  if (acc == out && m == 1 && in != out_ptr) {
    std::memcpy(out, in, count * es);  // Alone in its zone: its block is its own input.
  }
  const size_t segment = std::max<size_t>(1, ctx.chunk_bytes() / es);
  std::vector<Range> blocks;
  for (int k = 0; k < m; ++k) blocks.push_back(ElementsOf(count, shards, ShardsOf(k, m, shards)));

  // 1. Inside the zone: each rank ends with the zone's sum of its block.
  CollectiveContext zone(ctx, mates, 0);
  const uint64_t sent_before = ctx.bytes_sent();
  if (m > 1) {
    absl::Status s = RingReduceScatter(zone, src, acc, acc_type, op, blocks, segment, [](Range) {});
    if (!s.ok()) return s;
  }
  ctx.EndPhase("in zone");
  // Zone mates share a fabric faster than their NICs: this phase's rate is what this rank's NIC
  // carries (or a little less), which the cross-zone butterfly then shares among its links.
  if (const double seconds = absl::ToDoubleSeconds(ctx.phases().back().second);
      m > 1 && seconds > 0) {
    ctx.NoteSendRate(static_cast<double>(ctx.bytes_sent() - sent_before) / seconds);
  }
  // 2. Across zones, shard by shard: the holders of a shard (one per zone) all-reduce it, still in
  // the accumulator type (an average sums here and divides once, below).
  const ReduceOp cross_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const auto [first, last] = ShardsOf(j, m, shards);
  // With a codec across zones, what this rank holds of each shard is the decoding of bytes the
  // shard's owners sent: the zone gets those bytes, a quarter of the values with int8.
  const bool relay_encoded = inter_codec != nullptr && zone_count > 1 && CodecsApply(dtype, op);
  std::vector<EncodedPiece> own_pieces;
  for (int shard = first; shard < last && zone_count > 1; ++shard) {
    std::vector<int> holders;
    for (const auto& z : zones) {
      const int size = static_cast<int>(z.size());
      for (int k = 0; k < size; ++k) {
        const auto held = ShardsOf(k, size, shards);
        if (shard >= held.first && shard < held.second) holders.push_back(z[k]);
      }
    }
    CollectiveContext cross(ctx, holders, static_cast<uint32_t>(shard));
    const Range r = BlockOf(count, shards, shard);
    if (r.count == 0) continue;  // Fewer elements than shards: every holder skips it alike.
    std::vector<Range> parts;
    for (int z = 0; z < zone_count; ++z) parts.push_back(BlockOf(r.count, zone_count, z));
    // A holder that finished its zone's exchange early would send its contributions into the
    // NIC of a holder still busy with its own zone's, and slow that exchange further: on the
    // emulated four continents the last zone's took 12-14 s instead of 8 (perf/RESULTS.md).
    if (absl::Status s = cross.AwaitMembers(0); !s.ok()) return s;
    std::vector<EncodedPiece> pieces;
    LinkCodecs codecs{std::vector<const Codec*>(zone_count, inter_codec), inter_codec, feedback,
                      r.begin, &pieces};
    absl::Status s = ButterflyAllReduce(cross, acc + r.begin * es, acc + r.begin * es, r.count,
                                        acc_type, cross_op, parts, codecs, /*pace_links=*/true);
    if (!s.ok()) return s;
    for (EncodedPiece piece : pieces) {
      piece.range.begin += r.begin;
      own_pieces.push_back(piece);
    }
  }
  ctx.EndPhase("across zones");
  // 3. Round this rank's block once, then gather the zone's blocks as bytes: once every mate is
  // done across zones, for the same reason as above (here the results still crossing the WAN
  // into a mate's NIC would queue behind the zone's short-round-trip traffic).
  const Range own = blocks[j];
  FinalizeReduction(out + own.begin * out_es, acc + own.begin * es, own.count, dtype, op,
                    static_cast<int>(zone_of.size()));
  if (m == 1) {
    ctx.EndPhase("gather in zone");  // None to gather; every rank reports the same phases.
    return absl::OkStatus();
  }
  if (zone_count > 1) {
    if (absl::Status s = zone.AwaitMembers(0); !s.ok()) return s;
  }
  if (relay_encoded) {
    // Every mate's pieces, laid out as its cross-zone butterflies cut them.
    std::vector<std::vector<Range>> layout(m);
    for (int k = 0; k < m; ++k) {
      const auto [k_first, k_last] = ShardsOf(k, m, shards);
      for (int shard = k_first; shard < k_last; ++shard) {
        const Range r = BlockOf(count, shards, shard);
        for (int z = 0; z < zone_count && r.count > 0; ++z) {
          const Range part = BlockOf(r.count, zone_count, z);
          for (const Range& seg : Segments(part, segment)) {
            layout[k].push_back(Range{r.begin + seg.begin, seg.count});
          }
        }
      }
    }
    absl::Status gathered = GatherEncodedInZone(zone, layout, own_pieces, *inter_codec, out, dtype,
                                                op, static_cast<int>(zone_of.size()));
    ctx.EndPhase("gather in zone");
    return gathered;
  }
  RingAllGather gather(zone, out, out_es, blocks, std::max<size_t>(1, ctx.chunk_bytes() / out_es));
  gather.PostReceives();
  for (size_t k = 0; k < gather.own_segments(); ++k) gather.SendOwnSegment();
  absl::Status gathered = gather.Finish();
  ctx.EndPhase("gather in zone");
  return gathered;
}

}  // namespace hmc
