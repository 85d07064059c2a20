#ifndef HMC_COLLECTIVES_SCRATCH_POOL_H_
#define HMC_COLLECTIVES_SCRATCH_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/mutex.h"

namespace hmc {

// Staging memory reused across collectives. Fresh large allocations come from mmap and are
// returned on free, so every call would page-fault its staging buffers in again (measured: a
// quarter of a 64 MiB all-reduce's time); the pool keeps them instead.
class ScratchPool {
 public:
  struct Block {
    std::unique_ptr<uint8_t[]> memory;
    size_t bytes = 0;
  };

  // A block of at least `bytes`: the smallest cached one that fits, or a new one.
  Block Acquire(size_t bytes);
  void Release(Block block);

 private:
  Mutex mu_;
  std::vector<Block> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_SCRATCH_POOL_H_
