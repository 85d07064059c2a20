#include "collectives/allreduce_algorithms.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "collectives/butterfly.h"
#include "collectives/halving_doubling.h"
#include "collectives/hierarchical.h"
#include "collectives/host_collectives.h"
#include "collectives/one_shot_allreduce.h"
#include "collectives/shares.h"

namespace hmc {
namespace {

absl::Status RunRing(CollectiveContext& ctx, const AllReduceArgs& a) {
  return RingAllReduce(ctx, a.in, a.out, a.count, a.dtype, a.op, a.early);
}

// The first step's leading segments, as many as fit in kMaxEarlyBytes, to the next rank.
std::optional<EarlyPart> RingEarly(const EarlyCall& call) {
  const RingFirstStep first =
      RingFirstStepOf(call.rank, call.size, call.count, call.dtype, call.chunk_bytes);
  const size_t es = DTypeSize(call.dtype);
  const size_t segment_bytes = first.segment_elems * es;
  const size_t bytes =
      std::min(first.elements.count * es, kMaxEarlyBytes / segment_bytes * segment_bytes);
  if (bytes == 0 || segment_bytes < kMinEarlySegmentBytes) return std::nullopt;
  return EarlyPart{.offset = first.elements.begin * es,
                   .bytes = bytes,
                   .to = (call.rank + 1) % call.size,
                   .segment_bytes = segment_bytes,
                   .phase = Phase::kReduceScatter};
}

absl::Status RunHalvingDoubling(CollectiveContext& ctx, const AllReduceArgs& a) {
  return HalvingDoublingAllReduce(
      ctx, a.in, a.out, a.count, a.dtype, a.op,
      a.early != nullptr ? a.early->rest_sends : std::vector<CollectiveContext::Pending>{});
}

// The first message, where it is a piece of the input of one segment that may leave early.
std::optional<EarlyPart> HalvingDoublingEarly(const EarlyCall& call) {
  const std::optional<HalvingDoublingSend> first =
      HalvingDoublingFirstSend(call.rank, call.size, call.count, call.dtype);
  if (!first.has_value()) return std::nullopt;
  const size_t es = DTypeSize(call.dtype);
  const size_t bytes = first->count * es;
  if (bytes < kMinEarlySegmentBytes || bytes > kMaxHalvingDoublingEarlyBytes) return std::nullopt;
  return EarlyPart{.offset = first->begin * es,
                   .bytes = bytes,
                   .to = first->to,
                   .segment_bytes = bytes,
                   .phase = first->phase};
}

absl::Status RunHierarchical(CollectiveContext& ctx, const AllReduceArgs& a) {
  return HierarchicalAllReduce(ctx, a.zone_of, a.in, a.out, a.count, a.dtype, a.op, a.inter,
                               a.feedback);
}

// Each peer's link gets its class's codec; the all-gather encodes once for every receiver, so it
// uses the cross-zone codec wherever the group spans zones.
absl::Status RunButterfly(CollectiveContext& ctx, const AllReduceArgs& a) {
  LinkCodecs codecs;
  bool spans_zones = false;
  for (int p = 0; p < ctx.size(); ++p) {
    const bool same_zone = a.zone_of[p] == a.zone_of[ctx.rank()];
    codecs.for_peer.push_back(same_zone ? a.intra : a.inter);
    spans_zones |= !same_zone;
  }
  codecs.gather = spans_zones ? a.inter : a.intra;
  codecs.feedback = a.feedback;
  return ButterflyAllReduce(ctx, a.in, a.out, a.count, a.dtype, a.op,
                            PartsByWeight(a.count, a.shares), codecs, /*pace_links=*/false);
}

absl::Status RunOneShot(CollectiveContext& ctx, const AllReduceArgs& a) {
  return OneShotAllReduce(ctx, a.in, a.out, a.count, a.dtype, a.op, a.early);
}

// The whole vector to every member: small vectors only.
std::optional<EarlyPart> OneShotEarly(const EarlyCall& call) {
  const size_t bytes = call.count * DTypeSize(call.dtype);
  if (bytes > kMaxEarlyBytes) return std::nullopt;
  return EarlyPart{.bytes = bytes, .phase = Phase::kOneShot};
}

constexpr AllReduceAlgorithm kAlgorithms[] = {
    {.name = "ring",
     .wire_id = 1,
     .summary = "reduce-scatter then all-gather around a ring: 2(n-1) steps, bandwidth-optimal",
     .raced = true,
     .run = RunRing,
     .early = RingEarly},
    {.name = "halving_doubling",
     .wire_id = 2,
     .summary = "recursive halving then doubling: 2 log2(n) steps, for small and medium messages",
     .run = RunHalvingDoubling,
     .early = HalvingDoublingEarly},
    {.name = "hierarchical",
     .wire_id = 3,
     .summary = "inside each zone, then across zones in parallel shards, then back",
     .raced = true,
     .needs_zones_with_several_ranks = true,
     .run = RunHierarchical},
    {.name = "butterfly",
     .wire_id = 4,
     .summary = "direct reduce-scatter and all-gather with bandwidth-weighted shares",
     .raced = true,
     .run = RunButterfly},
    {.name = "one_shot",
     .wire_id = 5,
     .summary = "every rank sends its vector to every other and reduces all of them: one latency",
     .run = RunOneShot,
     .early = OneShotEarly},
};

}  // namespace

std::span<const AllReduceAlgorithm> AllReduceAlgorithms() { return kAlgorithms; }

const AllReduceAlgorithm* FindAllReduceAlgorithm(absl::string_view name) {
  for (const AllReduceAlgorithm& a : kAlgorithms) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const AllReduceAlgorithm* FindAllReduceAlgorithm(uint8_t wire_id) {
  for (const AllReduceAlgorithm& a : kAlgorithms) {
    if (a.wire_id == wire_id) return &a;
  }
  return nullptr;
}

std::string AllReduceAlgorithmNames() {
  return absl::StrJoin(kAlgorithms, ", ", [](std::string* out, const AllReduceAlgorithm& a) {
    absl::StrAppend(out, a.name);
  });
}

absl::Status CheckAllReduceAlgorithmOption(absl::string_view algo) {
  if (algo.empty() || algo == "auto" || FindAllReduceAlgorithm(algo) != nullptr) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("algo=%s: must be auto or one of %s", algo, AllReduceAlgorithmNames()));
}

std::string DescribeAllReduceAlgorithms() {
  std::string out;
  for (const AllReduceAlgorithm& a : kAlgorithms) {
    absl::StrAppendFormat(&out, "  %-18s %s\n", a.name, a.summary);
  }
  return out;
}

}  // namespace hmc
