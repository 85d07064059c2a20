#ifndef HMC_DDP_TRAINING_STATE_H_
#define HMC_DDP_TRAINING_STATE_H_

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace hmc::ddp {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The parameters that take gradients: what data-parallel training averages and steps.
std::vector<at::Tensor> Trainable(const std::vector<at::Tensor>& parameters);

// What a rank that joins fault-tolerant training downloads from the members
// (Communicator::Average's `state`): the parameters, the tensors the trainer shares (optimizer
// state, buffers such as batch-norm statistics) and the count of steps the group committed. Every
// member holds the same names, shapes and bits.
class TrainingState {
 public:
  // `parameters`: dense CPU tensors; the state refers to them (no copies).
  explicit TrainingState(const std::vector<at::Tensor>& parameters);

  // Adds tensors besides the parameters; dense CPU tensors with the same names and shapes on
  // every rank. Throws c10::Error otherwise.
  void Share(NamedTensors tensors);

  const NamedTensors& tensors() const { return tensors_; }
  int64_t step() const;
  void CountStep();
  void set_step(int64_t step);  // A checkpoint's.

 private:
  NamedTensors tensors_;  // "hmc.step" stays last.
  at::Tensor step_;
};

}  // namespace hmc::ddp

#endif  // HMC_DDP_TRAINING_STATE_H_
