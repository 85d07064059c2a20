#ifndef HMC_DDP_HMC_REDUCER_H_
#define HMC_DDP_HMC_REDUCER_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "ddp/averaging_hook.h"

namespace c10d {
class Reducer;
}

namespace hmc::ddp {

// libtorch's c10d::Reducer as PyTorch's DistributedDataParallel builds it, from C++: rank 0's
// parameters broadcast to every rank, buckets of `bucket_bytes` by libtorch's own assignment, a
// ProcessGroupHmc, and hmc's AveragingCommHook (owned by the reducer; `hook` points at it).
// Per step: reducer->prepare_for_forward(); reducer->prepare_for_backward({}); loss.backward();
// the parameters' gradients then hold the group's average.
struct HmcReducer {
  std::shared_ptr<c10d::Reducer> reducer;
  AveragingCommHook* hook = nullptr;
  size_t buckets = 0;
};
HmcReducer MakeReducer(std::shared_ptr<Communicator> comm, std::vector<at::Tensor> parameters,
                       size_t bucket_bytes, AveragingOptions averaging = {});

}  // namespace hmc::ddp

#endif  // HMC_DDP_HMC_REDUCER_H_
