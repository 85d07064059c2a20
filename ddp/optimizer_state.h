#ifndef HMC_DDP_OPTIMIZER_STATE_H_
#define HMC_DDP_OPTIMIZER_STATE_H_

// libtorch's optimizers create their per-parameter state at their first step, so a rank that
// joins a running group has none to receive the members' into. These create it up front, as the
// optimizers themselves would (zeros, step 0: the same first step follows), and name its tensors
// for DistributedDataParallel::ShareState.

#include <torch/optim.h>

#include <string>
#include <utility>
#include <vector>

namespace hmc::ddp {

// Adam, AdamW (their moments) and SGD with momentum (its buffer); other optimizers throw
// c10::Error. Tensors are named "optimizer.<kind>.<parameter index>".
std::vector<std::pair<std::string, at::Tensor>> MaterializeOptimizerState(
    torch::optim::Optimizer& optimizer);

// Adam and AdamW count steps per parameter in a plain integer, outside any tensor: sets them to
// `steps`, the steps the group took (a joiner's are the group's once it has the state).
void SetOptimizerSteps(torch::optim::Optimizer& optimizer, int64_t steps);

}  // namespace hmc::ddp

#endif  // HMC_DDP_OPTIMIZER_STATE_H_
