#include "ddp/training_state.h"

#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

namespace hmc::ddp {

std::vector<at::Tensor> Trainable(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> trainable;
  for (const at::Tensor& p : parameters) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  return trainable;
}

TrainingState::TrainingState(const std::vector<at::Tensor>& parameters)
    : step_(at::zeros({1}, at::kLong)) {
  for (size_t i = 0; i < parameters.size(); ++i) {
    TORCH_CHECK(parameters[i].is_contiguous() && parameters[i].device().is_cpu(),
                "hmc DDP: parameters must be dense CPU tensors");
    tensors_.emplace_back("parameter." + std::to_string(i), parameters[i].detach());
  }
  tensors_.emplace_back("hmc.step", step_);
}

void TrainingState::Share(NamedTensors tensors) {
  for (auto& [name, tensor] : tensors) {
    TORCH_CHECK(tensor.is_contiguous() && tensor.device().is_cpu(), "hmc DDP: shared state '", name,
                "' must be a dense CPU tensor");
    tensors_.insert(tensors_.end() - 1, {name, tensor.detach()});
  }
}

int64_t TrainingState::step() const { return step_.item<int64_t>(); }

void TrainingState::CountStep() { step_ += 1; }

void TrainingState::set_step(int64_t step) { step_.fill_(step); }

}  // namespace hmc::ddp
