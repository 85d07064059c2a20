#ifndef HMC_DDP_COLLABORATIVE_OPTIMIZER_H_
#define HMC_DDP_COLLABORATIVE_OPTIMIZER_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/mutex.h"
#include "ddp/gradient_averager.h"
#include "ddp/training_state.h"

namespace torch::optim {
class Optimizer;
}

namespace hmc::ddp {

struct CollaborativeOptions {
  // Samples the whole group processes between two optimizer steps.
  int64_t target_batch_size = 4096;
  AveragingOptions averaging;
  // Delayed parameter update: at a step, apply the previous round's average (which had a whole
  // round to cross the WAN) and start averaging this round's in the background. Parameters are
  // one step stale; communication hides behind computation.
  bool delay_updates = false;
  // How often progress is published and read (through the coordinator's key-value store).
  absl::Duration progress_interval = absl::Milliseconds(20);
  std::string run = "collab";  // Keys progress apart from other optimizers of the world.
  // Learning rate for large target batches: the optimizer's learning rates were tuned for batches
  // of base_batch_size samples (0: they are left as they are). Each round they are scaled by
  // (target_batch_size / base_batch_size)^lr_scaling_power (1: the linear rule for SGD, Goyal et
  // al.; 0.5: the square-root rule, for Adam) and ramped up linearly from the tuned values over
  // the first warmup_rounds rounds.
  int64_t base_batch_size = 0;
  double lr_scaling_power = 0.5;
  int64_t warmup_rounds = 0;
  // Each round is one Communicator::Average (each peer's mean gradient weighted by its samples):
  // a peer lost during a round leaves the survivors with the same outcome (the round commits
  // with the samples actually averaged, or every survivor keeps accumulating and tries again),
  // progress counts only the current members, and a peer that joins the running group downloads
  // the parameters, the optimizer's state and the round count in its first round, in which its
  // samples count for nothing. Not with delay_updates (an Average is not overlapped).
  bool fault_tolerant = false;
};

// A collaborative optimizer in the spirit of Hivemind's: every peer trains on its own batches and
// accumulates gradients (weighted by samples) until the group together has processed the target
// batch size, then all peers average — each peer's gradient weighted by its samples — and step
// together. Faster peers contribute more samples per step. Progress (each peer's round, samples
// in it and samples per second, with the time it was published) goes through the coordinator's
// key-value store from a background thread, so a local step never waits for the network. A peer
// ends the round when the group's samples *predicted* for now reach the target: each other
// peer's count plus its rate times the age of the count (at most the lag of a read; a peer not
// yet seen in the round counts from when this one began it). Counts that were merely read would be
// a coordinator round trip late, and every peer would train on for that long past the target (2.3×
// the target across four continents). The prediction can end a round a little short of the target;
// the average is always weighted by the samples actually in it.
//   CollaborativeOptimizer collab(comm, model->parameters(), sgd, {.target_batch_size = 1024});
//   loss.backward();                  // loss: the mean over the local batch
//   collab.Step(batch_size);          // true when the group stepped
class CollaborativeOptimizer {
 public:
  CollaborativeOptimizer(std::shared_ptr<Communicator> comm, std::vector<at::Tensor> parameters,
                         torch::optim::Optimizer& optimizer, CollaborativeOptions options);
  ~CollaborativeOptimizer();
  CollaborativeOptimizer(const CollaborativeOptimizer&) = delete;
  CollaborativeOptimizer& operator=(const CollaborativeOptimizer&) = delete;

  // Folds the gradients of a local batch of `samples` into this round and zeroes them; steps
  // with the group when the round is full. Returns true when the optimizer stepped.
  bool Step(int64_t samples);
  // With delayed updates: waits for the round in flight and applies it. Call once at the end.
  void Finish();

  int64_t steps() const { return steps_; }
  // Fault tolerant: the rounds the group completed (a joiner learns them in its first), and the
  // peers the last round averaged.
  int64_t rounds() const { return state_.step(); }
  int last_round_peers() const { return last_round_peers_; }
  // The group's samples behind the last average, and this peer's part of them.
  int64_t last_round_samples() const { return last_round_samples_; }
  int64_t last_round_local_samples() const { return last_round_local_samples_; }
  Traffic traffic() const { return averager_.traffic(); }

 private:
  struct Round {
    at::Tensor sum;      // Sample-weighted gradient sum, reduced in place.
    at::Tensor samples;  // f64 [1]: this peer's samples, then the group's.
    int64_t local_samples = 0;
    c10::intrusive_ptr<c10::ivalue::Future> sum_done;
    c10::intrusive_ptr<c10::ivalue::Future> samples_done;
  };

  // What a peer published of its progress (the value of its one key, rewritten each time).
  struct Progress {
    int64_t round = -1;
    int64_t samples = 0;
    double samples_per_s = 0;
    bool closed = false;  // The peer ended the round: its count is final.
    absl::Time at;
  };
  std::string ProgressKey(int id) const;
  absl::Status Publish(const Progress& progress);
  static std::optional<Progress> ParseProgress(absl::string_view value);
  // The other members' samples in this round, extrapolated to `now`.
  int64_t PredictedOthers(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the optimizer's learning rates for the round about to step (base_batch_size).
  void ScaleLearningRates();
  // Writes the flat `average` into the gradients and steps the optimizer.
  void StepWith(const at::Tensor& average);
  // This peer is in `round` from now on, with no samples in it yet.
  void BeginRound(int64_t round);
  // Fault tolerant: the round as one Average; true when it committed and the optimizer stepped.
  bool AverageRound();
  int64_t round() const;
  void TrackProgress();
  void StartAveraging();
  // Waits for the round in flight and steps the optimizer with its average.
  void ApplyInFlight();

  std::shared_ptr<Communicator> comm_;
  std::vector<at::Tensor> parameters_;
  torch::optim::Optimizer& optimizer_;
  const CollaborativeOptions options_;
  GradientAverager averager_;
  at::Tensor accumulated_;  // Flat, sample-weighted gradients of this round.
  std::optional<Round> in_flight_;
  int64_t steps_ = 0;
  int64_t last_round_samples_ = 0;
  int64_t last_round_local_samples_ = 0;
  int last_round_peers_ = 0;
  // The parameters, the optimizer's state and the rounds completed (as round_); fault
  // tolerant, a joining peer downloads it.
  TrainingState state_;

  // Shared with the progress thread: the round and what the other peers had done in it, as last
  // read (a count read for an earlier round must never count toward a later one).
  mutable Mutex mu_;
  int64_t round_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Progress> others_ ABSL_GUARDED_BY(mu_);  // The other members', as last read.
  absl::Time round_began_ ABSL_GUARDED_BY(mu_) = absl::Now();
  std::atomic<bool> round_closed_{false};  // This peer ended the round: it adds no samples.
  absl::Duration read_round_trip_ ABSL_GUARDED_BY(mu_);  // Of the last read of the others'.
  std::atomic<int64_t> local_samples_{0};                // Of this round.
  std::atomic<double> samples_per_s_{0};                 // This peer's, smoothed over its batches.
  absl::Time last_batch_at_ = absl::InfinitePast();
  std::vector<double> tuned_learning_rates_;  // Each parameter group's, as the trainer set it.
  Notification stop_;
  std::thread progress_;
};

}  // namespace hmc::ddp

#endif  // HMC_DDP_COLLABORATIVE_OPTIMIZER_H_
