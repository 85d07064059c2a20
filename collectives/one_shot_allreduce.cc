#include "collectives/one_shot_allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/host_reduce.h"

namespace hmc {

absl::Status OneShotAllReduce(CollectiveContext& ctx, const void* in, void* out, size_t count,
                              DType dtype, ReduceOp op, const EarlyData* early) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t bytes = count * DTypeSize(dtype);
  const DType acc_type = AccumulatorType(dtype);
  const size_t acc_bytes = count * DTypeSize(acc_type);
  uint8_t* all = ctx.Scratch(static_cast<size_t>(n) * bytes);
  std::memcpy(all + static_cast<size_t>(r) * bytes, in, bytes);
  const bool sent_early = early != nullptr && !early->ridden[r].empty();
  std::vector<CollectiveContext::Pending> pending =
      sent_early ? early->rest_sends : ctx.SendToMembers(Phase::kOneShot, 0, in, bytes);
  for (int step = 1; step < n; ++step) {
    const int from = (r - step + n) % n;
    uint8_t* theirs = all + static_cast<size_t>(from) * bytes;
    const size_t rode = early != nullptr ? std::min(early->ridden[from].size(), bytes) : 0;
    if (rode > 0) std::memcpy(theirs, early->ridden[from].data(), rode);
    if (rode < bytes) {
      pending.push_back(ctx.Recv(from, Phase::kOneShot, 0, 0, theirs + rode, bytes - rode));
    }
  }
  if (absl::Status s = ctx.WaitAll(pending); !s.ok()) return s;
  // The same operations on the same values, in rank order, on every rank.
  uint8_t* acc = ctx.Scratch(acc_bytes);
  uint8_t* next = ctx.Scratch(acc_bytes);
  ToAccumulator(acc, all, count, dtype);
  for (int p = 1; p < n; ++p) {
    ToAccumulator(next, all + static_cast<size_t>(p) * bytes, count, dtype);
    ReduceHost(acc, acc, next, count, acc_type, op);
  }
  FinalizeReduction(out, acc, count, dtype, op, n);
  return absl::OkStatus();
}

}  // namespace hmc
