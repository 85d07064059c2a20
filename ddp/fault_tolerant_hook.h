#ifndef HMC_DDP_FAULT_TOLERANT_HOOK_H_
#define HMC_DDP_FAULT_TOLERANT_HOOK_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <utility>
#include <vector>

#include "ddp/gradient_averager.h"
#include "ddp/training_state.h"

namespace hmc::ddp {

// The DDP communication hook of fault-tolerant training with libtorch's c10d::Reducer: a step's
// buckets are one fault-tolerant round (Communicator::BeginAverage), weighted by the samples this
// rank set for the step. Each bucket's all-reduce starts when the Reducer hands it over, so the
// averaging overlaps the rest of backward; the round's commit vote follows the last bucket, and
// every bucket's future completes once the round committed. A step that loses a peer commits
// with the survivors (weights renormalised to the samples actually averaged) or fails on every
// survivor alike, throwing c10::Error ("membership changed") out of loss.backward(): skip the
// step. A joining rank meets the members at a step's first bucket.
//
// A rank that joined the running group (Communicator::joined_running_group) downloads the
// parameters, the tensors given to ShareState and the step count in its first step, in which its
// gradients count for nothing: in the last bucket's call, once its backward is through.
class FaultTolerantCommHook : public c10d::CommHookInterface {
 public:
  // `parameters`: the reducer's, dense CPU tensors, each float or double.
  FaultTolerantCommHook(std::shared_ptr<Communicator> comm, std::vector<at::Tensor> parameters,
                        AveragingOptions options = {});

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override;

  // This rank's share of the coming step: the weight of its gradients (default 1).
  void set_samples(double samples) { samples_ = samples; }
  // Tensors besides the parameters that every rank keeps identical and a joining rank downloads
  // (DistributedDataParallel::ShareState). Call before the first step.
  void ShareState(NamedTensors tensors) { state_.Share(std::move(tensors)); }
  // Steps the group committed so far.
  int64_t step() const { return state_.step(); }
  // The last committed step's contributors, weights and state download.
  const AverageOutcome& last_step() const { return last_step_; }
  bool state_stale() const { return averager_.shared_communicator()->state_stale(); }
  Traffic traffic() const { return averager_.traffic(); }

 private:
  // Completes every bucket's future of the step with the round's outcome.
  void FinishStep();
  // Fails every bucket's future of the step with `status`.
  void FailStep(const absl::Status& status);

  GradientAverager averager_;
  TrainingState state_;
  double samples_ = 1;
  // The step's buckets so far and its round (which reads them: it goes first). The Reducer calls
  // runHook under its own lock.
  std::vector<std::pair<at::Tensor, c10::intrusive_ptr<c10::ivalue::Future>>> pending_;
  std::unique_ptr<GradientRound> round_;
  AverageOutcome last_step_;
};

}  // namespace hmc::ddp

#endif  // HMC_DDP_FAULT_TOLERANT_HOOK_H_
