#include "collectives/broadcast.h"

#include <vector>

#include "collectives/partition.h"

namespace hmc {

absl::Status ChainBroadcast(CollectiveContext& ctx, uint8_t* buffer, size_t bytes, int root) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return absl::OkStatus();
  const int position = (r - root + n) % n;
  const int next = (r + 1) % n;
  const int prev = (r - 1 + n) % n;
  const std::vector<Range> segments = Segments(Range{0, bytes}, ctx.chunk_bytes());
  std::vector<CollectiveContext::Pending> sends;
  std::vector<CollectiveContext::Pending> receives;
  if (position > 0) {
    for (uint32_t k = 0; k < segments.size(); ++k) {
      receives.push_back(
          ctx.Recv(prev, Phase::kBroadcast, 0, k, buffer + segments[k].begin, segments[k].count));
    }
  }
  for (uint32_t k = 0; k < segments.size(); ++k) {
    if (position > 0) {
      if (absl::Status s = ctx.Wait(receives[k]); !s.ok()) return s;
    }
    if (position < n - 1) {
      sends.push_back(
          ctx.Send(next, Phase::kBroadcast, 0, k, buffer + segments[k].begin, segments[k].count));
    }
  }
  return ctx.WaitAll(sends);
}

}  // namespace hmc
