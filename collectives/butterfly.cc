#include "collectives/butterfly.h"

#include <algorithm>

#include "collectives/host_collectives.h"
#include "collectives/host_reduce.h"

namespace hmc {
namespace {

// Bytes one segment of `count` values may take on the wire: raw elements, or a codec's bound.
size_t WireBytes(const Codec* codec, size_t count, size_t element_bytes) {
  return codec != nullptr ? codec->MaxEncodedBytes(count) : count * element_bytes;
}

// One scratch block carved into a slot per segment, each as large as the segment may be on the
// wire.
std::vector<uint8_t*> Slots(CollectiveContext& ctx, const std::vector<Range>& segments,
                            const Codec* codec, size_t element_bytes) {
  size_t total = 0;
  for (const Range& seg : segments) total += WireBytes(codec, seg.count, element_bytes);
  uint8_t* base = ctx.Scratch(total);
  std::vector<uint8_t*> slots;
  for (const Range& seg : segments) {
    slots.push_back(base);
    base += WireBytes(codec, seg.count, element_bytes);
  }
  return slots;
}

// Feedback keys of the owner's result encodings, apart from those of its contributions.
constexpr size_t kGatherKey = size_t{1} << 62;

}  // namespace

bool CodecsApply(DType dtype, ReduceOp op) {
  return AccumulatorType(dtype) == DType::kF32 && (op == ReduceOp::kSum || op == ReduceOp::kAvg);
}

absl::Status ButterflyAllReduce(CollectiveContext& ctx, const void* in, void* out_ptr, size_t count,
                                DType dtype, ReduceOp op, const std::vector<Range>& parts,
                                const LinkCodecs& codecs, bool pace_links) {
  const int n = ctx.size();
  const int me = ctx.rank();
  const auto [acc_type, es, src, acc] = PrepareAccumulation(ctx, in, out_ptr, count, dtype);
  const size_t out_es = DTypeSize(dtype);
  auto* out = static_cast<uint8_t*>(out_ptr);
  const bool coded = CodecsApply(dtype, op);
  auto link_codec = [&](int peer) { return coded ? codecs.for_peer[peer] : nullptr; };
  const Codec* gather_codec = coded ? codecs.gather : nullptr;
  const size_t segment = std::max<size_t>(1, ctx.chunk_bytes() / es);
  std::vector<std::vector<Range>> segments(n);
  for (int p = 0; p < n; ++p) segments[p] = Segments(parts[p], segment);
  const std::vector<Range>& mine = segments[me];

  // 1. Every receive is posted before data moves, so nothing waits in the transport's memory for
  // unexpected messages: each peer's contributions to this rank's part, then every other part's
  // result.
  std::vector<std::vector<uint8_t*>> contribution_slots(n), result_slots(n);
  std::vector<std::vector<CollectiveContext::Pending>> contributions(n), results(n);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    const Codec* codec = link_codec(p);
    contribution_slots[p] = Slots(ctx, mine, codec, es);
    for (size_t k = 0; k < mine.size(); ++k) {
      const size_t bytes = WireBytes(codec, mine[k].count, es);
      uint8_t* slot = contribution_slots[p][k];
      const auto step = static_cast<uint32_t>(k);
      contributions[p].push_back(codec != nullptr
                                     ? ctx.RecvUpTo(p, Phase::kReduceScatter, 0, step, slot, bytes)
                                     : ctx.Recv(p, Phase::kReduceScatter, 0, step, slot, bytes));
    }
    if (gather_codec != nullptr) result_slots[p] = Slots(ctx, segments[p], gather_codec, out_es);
    for (size_t k = 0; k < segments[p].size(); ++k) {
      const Range& seg = segments[p][k];
      const auto step = static_cast<uint32_t>(k);
      results[p].push_back(gather_codec != nullptr
                               ? ctx.RecvUpTo(p, Phase::kAllGather, 0, step, result_slots[p][k],
                                              gather_codec->MaxEncodedBytes(seg.count))
                               : ctx.Recv(p, Phase::kAllGather, 0, step, out + seg.begin * out_es,
                                          seg.count * out_es));
    }
  }

  // Every link carries this rank's contribution to its peer's part and the result of its own.
  auto link_bytes = [&, es = es] {  // Named: clang 14 cannot capture a structured binding.
    std::vector<uint64_t> bytes_to(n, 0);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      bytes_to[p] = WireBytes(link_codec(p), parts[p].count, es) +
                    WireBytes(gather_codec, parts[me].count, out_es);
    }
    return bytes_to;
  };
  const SendPacing pacing = pace_links ? ctx.PaceSends(link_bytes()) : SendPacing();

  // 2. This rank's contribution to every other part, segment k to every owner before segment k+1
  // to any, so that every link carries data from the start.
  std::vector<CollectiveContext::Pending> sends;
  std::vector<std::vector<uint8_t*>> encoded(n);
  size_t most_segments = 0;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    most_segments = std::max(most_segments, segments[p].size());
    if (link_codec(p) != nullptr) encoded[p] = Slots(ctx, segments[p], link_codec(p), es);
  }
  for (size_t k = 0; k < most_segments; ++k) {
    for (int d = 1; d < n; ++d) {
      const int p = (me + d) % n;
      if (k >= segments[p].size()) continue;
      const Range& seg = segments[p][k];
      const auto step = static_cast<uint32_t>(k);
      if (const Codec* codec = link_codec(p); codec != nullptr) {
        CodecState* state = codecs.feedback != nullptr
                                ? &(*codecs.feedback)[codecs.feedback_key_base + seg.begin]
                                : nullptr;
        const size_t bytes = codec->Encode(reinterpret_cast<const float*>(src) + seg.begin,
                                           seg.count, encoded[p][k], state);
        sends.push_back(ctx.Send(p, Phase::kReduceScatter, 0, step, encoded[p][k], bytes));
      } else {
        sends.push_back(
            ctx.Send(p, Phase::kReduceScatter, 0, step, src + seg.begin * es, seg.count * es));
      }
    }
  }

  // Every part's encoded results, [part][segment], for codecs.results.
  std::vector<std::vector<EncodedPiece>> pieces(n);
  // 3. Reduce this rank's part segment by segment; send each result to every peer at once.
  float* decoded = coded ? reinterpret_cast<float*>(ctx.Scratch(segment * sizeof(float))) : nullptr;
  const std::vector<uint8_t*> result_encoded =
      gather_codec != nullptr ? Slots(ctx, mine, gather_codec, out_es) : std::vector<uint8_t*>{};
  for (size_t k = 0; k < mine.size(); ++k) {
    const Range& seg = mine[k];
    uint8_t* partial = acc + seg.begin * es;
    for (int d = 1; d < n; ++d) {
      const int p = (me + n - d) % n;
      size_t received = 0;
      if (absl::Status s = ctx.Wait(contributions[p][k], &received); !s.ok()) return s;
      const void* values = contribution_slots[p][k];
      if (const Codec* codec = link_codec(p); codec != nullptr) {
        absl::Status s = codec->Decode(contribution_slots[p][k], received, decoded, seg.count);
        if (!s.ok()) return ctx.PeerError(p, s);
        values = decoded;
      }
      ReduceHost(partial, d == 1 ? src + seg.begin * es : partial, values, seg.count, acc_type, op);
    }
    const uint8_t* result = out + seg.begin * out_es;
    size_t result_bytes = seg.count * out_es;
    if (gather_codec != nullptr) {
      // The owner keeps what every receiver will decode, not its exact sum.
      FinalizeReduction(partial, partial, seg.count, DType::kF32, op, n);
      CodecState* state =
          codecs.feedback != nullptr
              ? &(*codecs.feedback)[kGatherKey | (codecs.feedback_key_base + seg.begin)]
              : nullptr;
      result_bytes = gather_codec->Encode(reinterpret_cast<const float*>(partial), seg.count,
                                          result_encoded[k], state);
      gather_codec->Decode(result_encoded[k], result_bytes, decoded, seg.count).IgnoreError();
      FinalizeReduction(out + seg.begin * out_es, decoded, seg.count, dtype, ReduceOp::kSum, 1);
      result = result_encoded[k];
      pieces[me].push_back(EncodedPiece{seg, result, result_bytes});
    } else {
      FinalizeReduction(out + seg.begin * out_es, partial, seg.count, dtype, op, n);
    }
    for (int d = 1; d < n; ++d) {
      sends.push_back(ctx.Send((me + d) % n, Phase::kAllGather, 0, static_cast<uint32_t>(k), result,
                               result_bytes));
    }
  }

  // 4. Every other part's result.
  for (int d = 1; d < n; ++d) {
    const int p = (me + d) % n;
    for (size_t k = 0; k < segments[p].size(); ++k) {
      size_t received = 0;
      if (absl::Status s = ctx.Wait(results[p][k], &received); !s.ok()) return s;
      if (gather_codec == nullptr) continue;
      const Range& seg = segments[p][k];
      absl::Status s = gather_codec->Decode(result_slots[p][k], received, decoded, seg.count);
      if (!s.ok()) return ctx.PeerError(p, s);
      FinalizeReduction(out + seg.begin * out_es, decoded, seg.count, dtype, ReduceOp::kSum, 1);
      pieces[p].push_back(EncodedPiece{seg, result_slots[p][k], received});
    }
  }
  if (gather_codec != nullptr && codecs.results != nullptr) {
    for (const auto& part : pieces) {
      codecs.results->insert(codecs.results->end(), part.begin(), part.end());
    }
  }
  return ctx.WaitAll(sends);
}

}  // namespace hmc
