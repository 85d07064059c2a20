#include "collectives/scratch_pool.h"

#include <algorithm>

namespace hmc {

ScratchPool::Block ScratchPool::Acquire(size_t bytes) {
  bytes = std::max<size_t>(bytes, 64);
  {
    MutexLock lock(&mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->bytes >= bytes && (best == free_.end() || it->bytes < best->bytes)) best = it;
    }
    if (best != free_.end()) {
      Block block = std::move(*best);
      free_.erase(best);
      return block;
    }
  }
  return Block{std::make_unique_for_overwrite<uint8_t[]>(bytes), bytes};
}

void ScratchPool::Release(Block block) {
  MutexLock lock(&mu_);
  // Keep a bounded number of blocks: the largest ones, which are the costly ones to fault in.
  free_.push_back(std::move(block));
  constexpr size_t kMaxBlocks = 16;
  if (free_.size() > kMaxBlocks) {
    auto smallest =
        std::min_element(free_.begin(), free_.end(),
                         [](const Block& a, const Block& b) { return a.bytes < b.bytes; });
    free_.erase(smallest);
  }
}

}  // namespace hmc
