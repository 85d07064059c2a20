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

// Every mate's pieces where the zone relays encoded bytes, laid out as its cross-zone butterflies
// cut them: mate k's element ranges, in the order it sends them.
std::vector<std::vector<Range>> EncodedPiecesLayout(const ZoneLayout& layout, int m, size_t count,
                                                    size_t segment) {
  const int zone_count = static_cast<int>(layout.zones.size());
  std::vector<std::vector<Range>> pieces(m);
  for (int k = 0; k < m; ++k) {
    const auto [k_first, k_last] = ZoneLayout::ShardsOf(k, m, layout.shards);
    for (int shard = k_first; shard < k_last; ++shard) {
      const Range r = BlockOf(count, layout.shards, shard);
      for (int z = 0; z < zone_count && r.count > 0; ++z) {
        const Range part = BlockOf(r.count, zone_count, z);
        for (const Range& seg : Segments(part, segment)) {
          pieces[k].push_back(Range{r.begin + seg.begin, seg.count});
        }
      }
    }
  }
  return pieces;
}

// Step 2: shard by shard, the holders of a shard (one per zone) all-reduce it, in the accumulator
// type (`acc`, in place). With a codec across zones, what this rank holds of each shard is the
// decoding of bytes the shard's owners sent: `own_pieces` gets those bytes.
absl::Status ReduceAcrossZones(CollectiveContext& ctx, const ZoneLayout& layout,
                               std::pair<int, int> held, uint8_t* acc, size_t count, DType acc_type,
                               ReduceOp cross_op, const Codec* inter_codec, CodecFeedback* feedback,
                               std::vector<EncodedPiece>& own_pieces) {
  const int zone_count = static_cast<int>(layout.zones.size());
  const size_t es = DTypeSize(acc_type);
  for (int shard = held.first; shard < held.second && zone_count > 1; ++shard) {
    std::vector<int> holders;
    for (size_t z = 0; z < layout.zones.size(); ++z) holders.push_back(layout.Holder(z, shard));
    CollectiveContext cross(ctx, holders, static_cast<uint32_t>(shard));
    const Range r = BlockOf(count, layout.shards, shard);
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
  return absl::OkStatus();
}

}  // namespace

ZoneLayout::ZoneLayout(const std::vector<int>& zone_of) {
  std::map<int, size_t> zone_index;
  for (int r = 0; r < static_cast<int>(zone_of.size()); ++r) {
    auto [it, added] = zone_index.emplace(zone_of[r], zones.size());
    if (added) zones.emplace_back();
    zones[it->second].push_back(r);
  }
  for (const std::vector<int>& z : zones) shards = std::max(shards, static_cast<int>(z.size()));
}

std::pair<int, int> ZoneLayout::ShardsOf(int j, int m, int shards) {
  return {j * shards / m, (j + 1) * shards / m};
}

int ZoneLayout::Holder(size_t zone, int shard) const {
  const std::vector<int>& z = zones[zone];
  const int m = static_cast<int>(z.size());
  int k = 0;
  while (ShardsOf(k, m, shards).second <= shard) ++k;
  return z[k];
}

size_t ZoneLayout::ZoneIndexOf(int rank) const {
  size_t zone = 0;
  while (std::find(zones[zone].begin(), zones[zone].end(), rank) == zones[zone].end()) ++zone;
  return zone;
}

absl::Status HierarchicalAllReduce(CollectiveContext& ctx, const std::vector<int>& zone_of,
                                   const void* in, void* out_ptr, size_t count, DType dtype,
                                   ReduceOp op, const Codec* inter_codec, CodecFeedback* feedback) {
  const ZoneLayout layout(zone_of);
  const std::vector<int>& mates = layout.zones[layout.ZoneIndexOf(ctx.rank())];
  const int m = static_cast<int>(mates.size());
  const int j = static_cast<int>(std::find(mates.begin(), mates.end(), ctx.rank()) - mates.begin());
  const int shards = layout.shards;
  const int zone_count = static_cast<int>(layout.zones.size());
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
  for (int k = 0; k < m; ++k) {
    blocks.push_back(ElementsOf(count, shards, ZoneLayout::ShardsOf(k, m, shards)));
  }

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
  // 2. Across zones: in the accumulator type (an average sums here and divides once, below).
  const ReduceOp cross_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const bool relay_encoded = inter_codec != nullptr && zone_count > 1 && CodecsApply(dtype, op);
  std::vector<EncodedPiece> own_pieces;
  if (absl::Status s =
          ReduceAcrossZones(ctx, layout, ZoneLayout::ShardsOf(j, m, shards), acc, count, acc_type,
                            cross_op, inter_codec, feedback, own_pieces);
      !s.ok()) {
    return s;
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
  absl::Status gathered;
  if (relay_encoded) {
    gathered = GatherEncodedInZone(zone, EncodedPiecesLayout(layout, m, count, segment), own_pieces,
                                   *inter_codec, out, dtype, op, static_cast<int>(zone_of.size()));
  } else {
    RingAllGather gather(zone, out, out_es, blocks,
                         std::max<size_t>(1, ctx.chunk_bytes() / out_es));
    gather.PostReceives();
    for (size_t k = 0; k < gather.own_segments(); ++k) gather.SendOwnSegment();
    gathered = gather.Finish();
  }
  ctx.EndPhase("gather in zone");
  return gathered;
}

}  // namespace hmc
