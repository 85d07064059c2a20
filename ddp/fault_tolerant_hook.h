#ifndef HMC_DDP_FAULT_TOLERANT_HOOK_H_
#define HMC_DDP_FAULT_TOLERANT_HOOK_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <vector>

#include "ddp/gradient_averager.h"
#include "ddp/training_state.h"

namespace hmc::ddp {

// The DDP communication hook of fault-tolerant training with libtorch's c10d::Reducer: a step's
// buckets are averaged together as one fault-tolerant round (Communicator::Average) once the
// Reducer hands over the last one, weighted by the samples this rank set for the step. A step
// that loses a peer commits with the survivors (weights renormalised to the samples actually
// averaged) or fails on every survivor alike, throwing c10::Error ("membership changed") out of
// loss.backward(): skip the step. One round per step, as the fault-tolerant DDP helper does,
// so that a joining rank always meets the members at a step's beginning; averaging does not
// overlap backward.
//
// A rank that joined the running group (Communicator::joined_running_group) downloads the
// parameters, the tensors given to ShareState and the step count in its first step, in which its
// gradients count for nothing. Its backward is through by then (the last bucket is ready).
class FaultTolerantCommHook : public c10d::CommHookInterface {
 public:
  // `parameters`: the reducer's, dense CPU tensors, all float or all double.
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
  struct Pending {
    at::Tensor flat;
    c10::intrusive_ptr<c10::ivalue::Future> future;
  };

  // Averages every pending bucket as one round and completes their futures.
  void AverageStep();

  GradientAverager averager_;
  TrainingState state_;
  double samples_ = 1;
  // The step's buckets so far. The Reducer calls runHook under its own lock.
  std::vector<Pending> pending_;
  at::Tensor all_;  // The step's buckets, one after the other, as one round averages them.
  AverageOutcome last_step_;
};

}  // namespace hmc::ddp

#endif  // HMC_DDP_FAULT_TOLERANT_HOOK_H_
