#include "collectives/halving_doubling.h"

#include <vector>

#include "collectives/host_reduce.h"

namespace hmc {

namespace {

// The first 2·rem ranks fold in pairs, the even one's vector into the odd one's, so that a power
// of two take part; returns this rank's place among them, -1 where it folded away.
absl::StatusOr<int> Fold(CollectiveContext& ctx, int rem, uint8_t* acc, uint8_t* incoming,
                         size_t count, DType acc_type, ReduceOp op) {
  const int r = ctx.rank();
  const size_t bytes = count * DTypeSize(acc_type);
  if (r >= 2 * rem) return r - rem;
  if (r % 2 == 0) {
    if (absl::Status s = ctx.Wait(ctx.Send(r + 1, Phase::kFold, 0, 0, acc, bytes)); !s.ok()) {
      return s;
    }
    return -1;
  }
  if (absl::Status s = ctx.Wait(ctx.Recv(r - 1, Phase::kFold, 0, 0, incoming, bytes)); !s.ok()) {
    return s;
  }
  ReduceHost(acc, incoming, acc, count, acc_type, op);
  return r / 2;
}

}  // namespace

absl::Status HalvingDoublingAllReduce(CollectiveContext& ctx, const void* in, void* out_ptr,
                                      size_t count, DType dtype, ReduceOp op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const DType acc_type = AccumulatorType(dtype);
  const size_t es = DTypeSize(acc_type);
  const size_t out_es = DTypeSize(dtype);
  auto* out = static_cast<uint8_t*>(out_ptr);
  uint8_t* acc = ctx.Scratch(count * es);
  uint8_t* incoming = ctx.Scratch(count * es);
  ToAccumulator(acc, in, count, dtype);

  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  // Rank among the p that take part in halving and doubling; -1 if folded away.
  absl::StatusOr<int> folded = Fold(ctx, rem, acc, incoming, count, acc_type, op);
  if (!folded.ok()) return folded.status();
  const int vrank = *folded;
  auto real_rank = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };

  if (vrank >= 0) {
    size_t lo = 0, hi = count;
    struct Parent {
      size_t lo, hi;
      bool kept_low;
    };
    std::vector<Parent> parents;
    uint32_t step = 0;
    for (int d = p / 2; d >= 1; d /= 2, ++step) {
      const int partner = real_rank(vrank ^ d);
      const size_t mid = lo + (hi - lo) / 2;
      const bool keep_low = (vrank & d) == 0;
      const size_t keep_lo = keep_low ? lo : mid, keep_hi = keep_low ? mid : hi;
      const size_t give_lo = keep_low ? mid : lo, give_hi = keep_low ? hi : mid;
      parents.push_back(Parent{lo, hi, keep_low});
      auto sent =
          ctx.Send(partner, Phase::kHalving, step, 0, acc + give_lo * es, (give_hi - give_lo) * es);
      auto received = ctx.Recv(partner, Phase::kHalving, step, 0, incoming + keep_lo * es,
                               (keep_hi - keep_lo) * es);
      if (absl::Status s = ctx.Wait(received); !s.ok()) return s;
      ReduceHost(acc + keep_lo * es, acc + keep_lo * es, incoming + keep_lo * es, keep_hi - keep_lo,
                 acc_type, op);
      if (absl::Status s = ctx.Wait(sent); !s.ok()) return s;
      lo = keep_lo;
      hi = keep_hi;
    }
    FinalizeReduction(out + lo * out_es, acc + lo * es, hi - lo, dtype, op, n);
    for (int d = 1; d < p; d *= 2, ++step) {
      const int partner = real_rank(vrank ^ d);
      const Parent parent = parents.back();
      parents.pop_back();
      const size_t parent_lo = parent.lo, parent_hi = parent.hi;
      const size_t other_lo = parent.kept_low ? hi : parent_lo;
      const size_t other_hi = parent.kept_low ? parent_hi : lo;
      auto sent =
          ctx.Send(partner, Phase::kDoubling, step, 0, out + lo * out_es, (hi - lo) * out_es);
      auto received = ctx.Recv(partner, Phase::kDoubling, step, 0, out + other_lo * out_es,
                               (other_hi - other_lo) * out_es);
      if (absl::Status s = ctx.WaitAll({sent, received}); !s.ok()) return s;
      lo = parent_lo;
      hi = parent_hi;
    }
  }
  if (r < 2 * rem) {
    if (r % 2 == 0) return ctx.Wait(ctx.Recv(r + 1, Phase::kUnfold, 0, 0, out, count * out_es));
    return ctx.Wait(ctx.Send(r - 1, Phase::kUnfold, 0, 0, out, count * out_es));
  }
  return absl::OkStatus();
}

}  // namespace hmc
