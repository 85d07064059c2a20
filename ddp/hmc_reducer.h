#ifndef HMC_DDP_HMC_REDUCER_H_
#define HMC_DDP_HMC_REDUCER_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "ddp/averaging_hook.h"
#include "ddp/fault_tolerant_hook.h"

namespace c10d {
class Reducer;
}

namespace hmc::ddp {

// libtorch's c10d::Reducer as PyTorch's DistributedDataParallel builds it, from C++: rank 0's
// parameters broadcast to every rank, buckets of `bucket_bytes` by libtorch's own assignment, a
// ProcessGroupHmc, and hmc's AveragingCommHook (owned by the reducer; `hook` points at it).
// Per step: reducer->prepare_for_forward(); reducer->prepare_for_backward({}); loss.backward();
// the parameters' gradients then hold the group's average.
//
// `fault_tolerant`: the hook is a FaultTolerantCommHook instead (`fault_tolerant_hook` points at
// it): a step that loses a peer commits with the survivors or throws "membership changed" out of
// loss.backward() on every survivor; a rank that joined the running group takes the members'
// parameters and state in its first step instead of rank 0's parameters.
struct HmcReducer {
  std::shared_ptr<c10d::Reducer> reducer;
  AveragingCommHook* hook = nullptr;
  FaultTolerantCommHook* fault_tolerant_hook = nullptr;
  size_t buckets = 0;
};
HmcReducer MakeReducer(std::shared_ptr<Communicator> comm, std::vector<at::Tensor> parameters,
                       size_t bucket_bytes, AveragingOptions averaging = {},
                       bool fault_tolerant = false);

}  // namespace hmc::ddp

#endif  // HMC_DDP_HMC_REDUCER_H_
