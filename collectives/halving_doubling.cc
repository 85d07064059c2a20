#include "collectives/halving_doubling.h"

#include <vector>

#include "collectives/host_reduce.h"

namespace hmc {

namespace {

// The largest power of two not above n: the ranks that take part in halving and doubling.
int PowerOfTwoBelow(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Where virtual rank v (among the power of two) really is, with `rem` pairs folded.
int RealRank(int v, int rem) { return v < rem ? 2 * v + 1 : v + rem; }

// The elements a rank at virtual rank `vrank` gives its partner at distance d of [lo, hi), and
// those it keeps.
struct Halves {
  size_t keep_lo, keep_hi, give_lo, give_hi;
  bool keep_low;
};
Halves Halve(int vrank, int d, size_t lo, size_t hi) {
  const size_t mid = lo + (hi - lo) / 2;
  const bool keep_low = (vrank & d) == 0;
  return keep_low ? Halves{lo, mid, mid, hi, true} : Halves{mid, hi, lo, mid, false};
}

// The first 2·rem ranks fold in pairs, the even one's vector into the odd one's, so that a power
// of two take part; returns this rank's place among them, -1 where it folded away. `sent_early`:
// an even rank's fold, if it left with the argument check.
absl::StatusOr<int> Fold(CollectiveContext& ctx, int rem, uint8_t* acc, uint8_t* incoming,
                         size_t count, DType acc_type, ReduceOp op,
                         std::vector<CollectiveContext::Pending>& sent_early) {
  const int r = ctx.rank();
  const size_t bytes = count * DTypeSize(acc_type);
  if (r >= 2 * rem) return r - rem;
  if (r % 2 == 0) {
    const CollectiveContext::Pending sent =
        sent_early.empty() ? ctx.Send(r + 1, Phase::kFold, 0, 0, acc, bytes) : sent_early.front();
    sent_early.clear();
    if (absl::Status s = ctx.Wait(sent); !s.ok()) return s;
    return -1;
  }
  if (absl::Status s = ctx.Wait(ctx.Recv(r - 1, Phase::kFold, 0, 0, incoming, bytes)); !s.ok()) {
    return s;
  }
  ReduceHost(acc, incoming, acc, count, acc_type, op);
  return r / 2;
}

}  // namespace

std::optional<HalvingDoublingSend> HalvingDoublingFirstSend(int rank, int size, size_t count,
                                                            DType dtype) {
  if (size < 2 || AccumulatorType(dtype) != dtype) return std::nullopt;
  const int p = PowerOfTwoBelow(size);
  const int rem = size - p;
  if (rank < 2 * rem) {
    if (rank % 2 != 0) return std::nullopt;
    return HalvingDoublingSend{rank + 1, Phase::kFold, 0, count};
  }
  const int vrank = rank - rem;
  const Halves h = Halve(vrank, p / 2, 0, count);
  return HalvingDoublingSend{RealRank(vrank ^ (p / 2), rem), Phase::kHalving, h.give_lo,
                             h.give_hi - h.give_lo};
}

absl::Status HalvingDoublingAllReduce(CollectiveContext& ctx, const void* in, void* out_ptr,
                                      size_t count, DType dtype, ReduceOp op,
                                      std::vector<CollectiveContext::Pending> sent_early) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const DType acc_type = AccumulatorType(dtype);
  const size_t es = DTypeSize(acc_type);
  const size_t out_es = DTypeSize(dtype);
  auto* out = static_cast<uint8_t*>(out_ptr);
  uint8_t* acc = ctx.Scratch(count * es);
  uint8_t* incoming = ctx.Scratch(count * es);
  ToAccumulator(acc, in, count, dtype);

  const int p = PowerOfTwoBelow(n);
  const int rem = n - p;
  // Rank among the p that take part in halving and doubling; -1 if folded away.
  absl::StatusOr<int> folded = Fold(ctx, rem, acc, incoming, count, acc_type, op, sent_early);
  if (!folded.ok()) return folded.status();
  const int vrank = *folded;
  auto real_rank = [&](int v) { return RealRank(v, rem); };

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
      const auto [keep_lo, keep_hi, give_lo, give_hi, keep_low] = Halve(vrank, d, lo, hi);
      parents.push_back(Parent{lo, hi, keep_low});
      auto received = ctx.Recv(partner, Phase::kHalving, step, 0, incoming + keep_lo * es,
                               (keep_hi - keep_lo) * es);
      // The first step's half may have left with the argument check (a rank that did not fold).
      auto sent = !sent_early.empty() ? sent_early.front()
                                      : ctx.Send(partner, Phase::kHalving, step, 0,
                                                 acc + give_lo * es, (give_hi - give_lo) * es);
      sent_early.clear();
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
