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

namespace {

// One butterfly all-reduce call, in the four steps ButterflyAllReduce runs.
class ButterflyCall {
 public:
  ButterflyCall(CollectiveContext& ctx, const void* in, void* out, size_t count, DType dtype,
                ReduceOp op, const std::vector<Range>& parts, const LinkCodecs& codecs)
      : ctx_(ctx),
        n_(ctx.size()),
        me_(ctx.rank()),
        accumulation_(PrepareAccumulation(ctx, in, out, count, dtype)),
        es_(accumulation_.element_bytes),
        out_es_(DTypeSize(dtype)),
        out_(static_cast<uint8_t*>(out)),
        dtype_(dtype),
        op_(op),
        parts_(parts),
        codecs_(codecs),
        coded_(CodecsApply(dtype, op)),
        gather_codec_(coded_ ? codecs.gather : nullptr),
        segment_(std::max<size_t>(1, ctx.chunk_bytes() / es_)),
        segments_(n_),
        contribution_slots_(n_),
        result_slots_(n_),
        contributions_(n_),
        results_(n_),
        pieces_(n_) {
    for (int p = 0; p < n_; ++p) segments_[p] = Segments(parts_[p], segment_);
  }

  // 1. Every receive is posted before data moves, so nothing waits in the transport's memory for
  // unexpected messages: each peer's contributions to this rank's part, then every other part's
  // result.
  void PostReceives();
  // Every link carries this rank's contribution to its peer's part and the result of its own.
  std::vector<uint64_t> LinkBytes() const;
  // 2. This rank's contribution to every other part, segment k to every owner before segment k+1
  // to any, so that every link carries data from the start.
  void SendContributions();
  // 3. Reduce this rank's part segment by segment; send each result to every peer at once.
  absl::Status ReduceOwnPart();
  // 4. Every other part's result; then the sends' completion.
  absl::Status GatherResults();

 private:
  const Codec* LinkCodec(int peer) const { return coded_ ? codecs_.for_peer[peer] : nullptr; }
  const std::vector<Range>& mine() const { return segments_[me_]; }

  CollectiveContext& ctx_;
  const int n_;
  const int me_;
  const Accumulation accumulation_;
  const size_t es_;      // Accumulator element bytes.
  const size_t out_es_;  // Output element bytes.
  uint8_t* const out_;
  const DType dtype_;
  const ReduceOp op_;
  const std::vector<Range>& parts_;
  const LinkCodecs& codecs_;
  const bool coded_;
  const Codec* const gather_codec_;
  const size_t segment_;
  std::vector<std::vector<Range>> segments_;  // [part][segment]
  std::vector<std::vector<uint8_t*>> contribution_slots_, result_slots_;
  std::vector<std::vector<CollectiveContext::Pending>> contributions_, results_;
  std::vector<CollectiveContext::Pending> sends_;
  float* decoded_ = nullptr;  // One segment, decoded (codecs only).
  // Every part's encoded results, [part][segment], for codecs.results.
  std::vector<std::vector<EncodedPiece>> pieces_;
};

void ButterflyCall::PostReceives() {
  for (int p = 0; p < n_; ++p) {
    if (p == me_) continue;
    const Codec* codec = LinkCodec(p);
    contribution_slots_[p] = Slots(ctx_, mine(), codec, es_);
    for (size_t k = 0; k < mine().size(); ++k) {
      const size_t bytes = WireBytes(codec, mine()[k].count, es_);
      uint8_t* slot = contribution_slots_[p][k];
      const auto step = static_cast<uint32_t>(k);
      contributions_[p].push_back(
          codec != nullptr ? ctx_.RecvUpTo(p, Phase::kReduceScatter, 0, step, slot, bytes)
                           : ctx_.Recv(p, Phase::kReduceScatter, 0, step, slot, bytes));
    }
    if (gather_codec_ != nullptr) {
      result_slots_[p] = Slots(ctx_, segments_[p], gather_codec_, out_es_);
    }
    for (size_t k = 0; k < segments_[p].size(); ++k) {
      const Range& seg = segments_[p][k];
      const auto step = static_cast<uint32_t>(k);
      results_[p].push_back(gather_codec_ != nullptr
                                ? ctx_.RecvUpTo(p, Phase::kAllGather, 0, step, result_slots_[p][k],
                                                gather_codec_->MaxEncodedBytes(seg.count))
                                : ctx_.Recv(p, Phase::kAllGather, 0, step,
                                            out_ + seg.begin * out_es_, seg.count * out_es_));
    }
  }
}

std::vector<uint64_t> ButterflyCall::LinkBytes() const {
  std::vector<uint64_t> bytes_to(n_, 0);
  for (int p = 0; p < n_; ++p) {
    if (p == me_) continue;
    bytes_to[p] = WireBytes(LinkCodec(p), parts_[p].count, es_) +
                  WireBytes(gather_codec_, parts_[me_].count, out_es_);
  }
  return bytes_to;
}

void ButterflyCall::SendContributions() {
  std::vector<std::vector<uint8_t*>> encoded(n_);
  size_t most_segments = 0;
  for (int p = 0; p < n_; ++p) {
    if (p == me_) continue;
    most_segments = std::max(most_segments, segments_[p].size());
    if (LinkCodec(p) != nullptr) encoded[p] = Slots(ctx_, segments_[p], LinkCodec(p), es_);
  }
  const uint8_t* src = accumulation_.src;
  for (size_t k = 0; k < most_segments; ++k) {
    for (int d = 1; d < n_; ++d) {
      const int p = (me_ + d) % n_;
      if (k >= segments_[p].size()) continue;
      const Range& seg = segments_[p][k];
      const auto step = static_cast<uint32_t>(k);
      if (const Codec* codec = LinkCodec(p); codec != nullptr) {
        CodecState* state = codecs_.feedback != nullptr
                                ? &(*codecs_.feedback)[codecs_.feedback_key_base + seg.begin]
                                : nullptr;
        const size_t bytes = codec->Encode(reinterpret_cast<const float*>(src) + seg.begin,
                                           seg.count, encoded[p][k], state);
        sends_.push_back(ctx_.Send(p, Phase::kReduceScatter, 0, step, encoded[p][k], bytes));
      } else {
        sends_.push_back(
            ctx_.Send(p, Phase::kReduceScatter, 0, step, src + seg.begin * es_, seg.count * es_));
      }
    }
  }
}

absl::Status ButterflyCall::ReduceOwnPart() {
  if (coded_) decoded_ = reinterpret_cast<float*>(ctx_.Scratch(segment_ * sizeof(float)));
  const std::vector<uint8_t*> result_encoded = gather_codec_ != nullptr
                                                   ? Slots(ctx_, mine(), gather_codec_, out_es_)
                                                   : std::vector<uint8_t*>{};
  const uint8_t* src = accumulation_.src;
  for (size_t k = 0; k < mine().size(); ++k) {
    const Range& seg = mine()[k];
    uint8_t* partial = accumulation_.acc + seg.begin * es_;
    for (int d = 1; d < n_; ++d) {
      const int p = (me_ + n_ - d) % n_;
      size_t received = 0;
      if (absl::Status s = ctx_.Wait(contributions_[p][k], &received); !s.ok()) return s;
      const void* values = contribution_slots_[p][k];
      if (const Codec* codec = LinkCodec(p); codec != nullptr) {
        absl::Status s = codec->Decode(contribution_slots_[p][k], received, decoded_, seg.count);
        if (!s.ok()) return ctx_.PeerError(p, s);
        values = decoded_;
      }
      ReduceHost(partial, d == 1 ? src + seg.begin * es_ : partial, values, seg.count,
                 accumulation_.type, op_);
    }
    const uint8_t* result = out_ + seg.begin * out_es_;
    size_t result_bytes = seg.count * out_es_;
    if (gather_codec_ != nullptr) {
      // The owner keeps what every receiver will decode, not its exact sum.
      FinalizeReduction(partial, partial, seg.count, DType::kF32, op_, n_);
      CodecState* state =
          codecs_.feedback != nullptr
              ? &(*codecs_.feedback)[kGatherKey | (codecs_.feedback_key_base + seg.begin)]
              : nullptr;
      result_bytes = gather_codec_->Encode(reinterpret_cast<const float*>(partial), seg.count,
                                           result_encoded[k], state);
      gather_codec_->Decode(result_encoded[k], result_bytes, decoded_, seg.count).IgnoreError();
      FinalizeReduction(out_ + seg.begin * out_es_, decoded_, seg.count, dtype_, ReduceOp::kSum, 1);
      result = result_encoded[k];
      pieces_[me_].push_back(EncodedPiece{seg, result, result_bytes});
    } else {
      FinalizeReduction(out_ + seg.begin * out_es_, partial, seg.count, dtype_, op_, n_);
    }
    for (int d = 1; d < n_; ++d) {
      sends_.push_back(ctx_.Send((me_ + d) % n_, Phase::kAllGather, 0, static_cast<uint32_t>(k),
                                 result, result_bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status ButterflyCall::GatherResults() {
  for (int d = 1; d < n_; ++d) {
    const int p = (me_ + d) % n_;
    for (size_t k = 0; k < segments_[p].size(); ++k) {
      size_t received = 0;
      if (absl::Status s = ctx_.Wait(results_[p][k], &received); !s.ok()) return s;
      if (gather_codec_ == nullptr) continue;
      const Range& seg = segments_[p][k];
      absl::Status s = gather_codec_->Decode(result_slots_[p][k], received, decoded_, seg.count);
      if (!s.ok()) return ctx_.PeerError(p, s);
      FinalizeReduction(out_ + seg.begin * out_es_, decoded_, seg.count, dtype_, ReduceOp::kSum, 1);
      pieces_[p].push_back(EncodedPiece{seg, result_slots_[p][k], received});
    }
  }
  if (gather_codec_ != nullptr && codecs_.results != nullptr) {
    for (const auto& part : pieces_) {
      codecs_.results->insert(codecs_.results->end(), part.begin(), part.end());
    }
  }
  return ctx_.WaitAll(sends_);
}

}  // namespace

absl::Status ButterflyAllReduce(CollectiveContext& ctx, const void* in, void* out, size_t count,
                                DType dtype, ReduceOp op, const std::vector<Range>& parts,
                                const LinkCodecs& codecs, bool pace_links) {
  ButterflyCall call(ctx, in, out, count, dtype, op, parts, codecs);
  call.PostReceives();
  const SendPacing pacing = pace_links ? ctx.PaceSends(call.LinkBytes()) : SendPacing();
  call.SendContributions();
  if (absl::Status s = call.ReduceOwnPart(); !s.ok()) return s;
  return call.GatherResults();
}

}  // namespace hmc
