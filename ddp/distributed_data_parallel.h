#ifndef HMC_DDP_DISTRIBUTED_DATA_PARALLEL_H_
#define HMC_DDP_DISTRIBUTED_DATA_PARALLEL_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/mutex.h"
#include "ddp/gradient_averager.h"
#include "ddp/training_state.h"

namespace hmc::ddp {

struct DdpOptions {
  // Buckets close at this many bytes (PyTorch's DDP: 25 MiB, the first 1 MiB); small buckets
  // start averaging earlier in backward, large ones pay fewer latencies.
  size_t bucket_bytes = 4 << 20;
  AveragingOptions averaging;
  bool broadcast_parameters = true;  // Start from rank 0's values, as DDP does.
  // Every step is one fault-tolerant averaging round (Communicator::BeginAverage), weighted by the
  // samples set_samples gave: each bucket's all-reduce starts when the bucket is ready, as without
  // this option, and the round's commit vote follows the last bucket. A step that loses a peer
  // commits with the survivors (weights renormalised to the samples actually averaged) or fails on
  // every survivor alike; no rank ever steps with a gradient the others do not have. Float or
  // double parameters.
  // A rank that joined the running group (Communicator::joined_running_group) downloads the
  // parameters, the tensors given to ShareState and the step count from the members in its first
  // step, in which its own gradients count for nothing; it does not take rank 0's parameters.
  bool fault_tolerant = false;
};

// DDP for plain libtorch C++ trainers (libtorch C++ has no DDP module). Parameters are grouped
// into buckets in reverse order (roughly the order backward produces their gradients); a hook on
// each parameter copies its gradient into its bucket as autograd produces it, and a bucket whose
// gradients are all there starts averaging at once — while the rest of backward runs. Buckets
// start in index order on every rank, so ranks issue the same collectives in the same order.
//   hmc::ddp::DistributedDataParallel ddp(comm, model->parameters());
//   loss.backward();
//   ddp.FinishBackward();  // .grad() now holds the group's average
//   optimizer.step();
// A parameter without a gradient in a step contributes zeros. Zero the gradients every step (as
// usual): FinishBackward overwrites .grad() with this step's average. Throws c10::Error on
// failure (a peer that died, mismatched models).
class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<Communicator> comm, std::vector<at::Tensor> parameters,
                          DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Fault tolerant: this rank's share of the coming steps, the weight of its gradients (default
  // 1). Set it before backward: the step's first bucket starts the round with it. (Otherwise
  // every rank's gradients count alike.)
  void set_samples(double samples);
  // Waits for every bucket and writes the averages into the parameters' gradients. Fault
  // tolerant, a step whose averaging failed on every survivor throws c10::Error whose message
  // says "membership changed": skip the step (the gradients are left as this rank computed them)
  // and go on.
  void FinishBackward();
  // Fault tolerant: the last committed step's contributors and weights.
  const AverageOutcome& last_step() const { return last_step_; }
  // Fault tolerant: tensors besides the parameters that every rank keeps identical and a joining
  // rank downloads (optimizer state, see MaterializeOptimizerState; buffers such as batch-norm
  // statistics). Dense CPU tensors that exist, with the same names and shapes on every rank,
  // from the first step on. Call before the first step.
  void ShareState(std::vector<std::pair<std::string, at::Tensor>> tensors);
  // Fault tolerant: steps the group committed so far; a joining rank has the group's count after
  // its first step.
  int64_t step() const { return state_.step(); }
  // Fault tolerant: whether this rank still has to download the group's state (a joiner before
  // its first step).
  bool state_stale() const;

  size_t bucket_count() const { return buckets_.size(); }
  Traffic traffic() const { return averager_.traffic(); }

 private:
  struct Slot {
    size_t bucket;
    int64_t offset;
    bool filled = false;
  };
  struct Bucket {
    at::Tensor flat;
    std::vector<size_t> parameters;
    size_t pending = 0;  // Gradients not yet copied in this step.
    c10::intrusive_ptr<c10::ivalue::Future> future;
  };

  void OnGradient(size_t parameter, const at::Tensor& grad);
  // Starts every bucket that is complete and follows only started ones.
  void StartReadyBuckets() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fault tolerant: adds the bucket to the step's round (the first one begins it).
  void AddToRound(size_t bucket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fault tolerant: finishes the step's round; throws c10::Error where it failed.
  void FinishStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::vector<at::Tensor> parameters_;
  GradientAverager averager_;
  const DdpOptions options_;
  AverageOutcome last_step_;
  TrainingState state_;  // Fault tolerant: what a joining rank downloads.
  std::vector<unsigned> hooks_;
  Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  size_t next_to_start_ ABSL_GUARDED_BY(mu_) = 0;
  double samples_ ABSL_GUARDED_BY(mu_) = 1;
  std::unique_ptr<GradientRound> round_ ABSL_GUARDED_BY(mu_);  // Fault tolerant: the step's.
};

}  // namespace hmc::ddp

#endif  // HMC_DDP_DISTRIBUTED_DATA_PARALLEL_H_
