#ifndef HMC_EXAMPLES_COMMON_TRAINING_RUN_H_
#define HMC_EXAMPLES_COMMON_TRAINING_RUN_H_

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/communicator.h"
#include "ddp/averaging_hook.h"
#include "ddp/collaborative_optimizer.h"
#include "ddp/diloco.h"
#include "ddp/distributed_data_parallel.h"

namespace c10d {
class Reducer;
}

namespace hmc::examples {

// What the two training examples share: joining the group when started by hmcrun (alone
// otherwise), averaging gradients, the epoch loop with reports of traffic and egress, and
// checkpoints.
class TrainingRun {
 public:
  struct Settings {
    // ddp: average every step with the DDP helper; reducer: the same through libtorch's
    // c10d::Reducer with hmc's comm hook; collab: collaborative optimizer; local: no averaging
    // at all (each rank trains alone: the baseline of the overhead benchmark); diloco: each rank
    // steps alone for inner_steps steps, then the group averages the pseudo-gradients and takes
    // an outer Nesterov step (ddp::DiLoCo).
    std::string sync = "ddp";
    int64_t target_batch = 0;  // collab: samples the group processes per optimizer step.
    bool delay_updates = false;
    // collab: the learning rate, tuned for the global batch `base_batch`, is scaled to the target
    // batch by (target / base)^lr_scaling_power over the first warmup_rounds rounds
    // (ddp::CollaborativeOptions); base_batch 0: left as it is.
    int64_t base_batch = 0;
    double lr_scaling_power = 0.5;
    int64_t warmup_rounds = 0;
    std::string codec_inter;  // Empty: the communicator's option.
    std::string codec_intra;
    std::string json_path;        // Per-epoch JSON lines; empty: none.
    std::string checkpoint_path;  // Saved each epoch by rank 0 (diloco: by every rank), resumed.
    int threads = 0;              // Torch intra-op threads; 0: cores / ranks on this host.
    size_t bucket_bytes = ddp::DdpOptions{}.bucket_bytes;    // ddp and reducer buckets.
    int64_t inner_steps = ddp::DiLoCoOptions{}.inner_steps;  // diloco: steps between syncs.
    double outer_lr = ddp::DiLoCoOptions{}.outer_lr;
    double outer_momentum = ddp::DiLoCoOptions{}.outer_momentum;
    int fragments = 1;  // diloco: > 1 streams fragments of the model at staggered steps.
    // A progress line during each epoch (rank 0): rewritten in place when `progress_in_place`
    // (a terminal), else one line per update; at most one a second.
    bool progress = false;
    bool progress_in_place = false;
    // Evaluate also every this many steps inside an epoch (0: only at its end), for the time a
    // mode takes to reach an accuracy: rank 0 prints each result and appends it to the JSON
    // lines as {"eval_step": ...}. Steps are the optimizer's (ddp, reducer), the group's
    // committed ones (ddp-ft) or each rank's local ones (diloco, local); collab, whose ranks step
    // unevenly, refuses it.
    int64_t eval_every = 0;
  };

  // Joins the group when HMC_COORDINATOR is set (as hmcrun sets it), else runs alone.
  static absl::StatusOr<std::unique_ptr<TrainingRun>> Start(const Settings& settings);

  int rank() const { return rank_; }
  int world() const { return world_; }
  bool alone() const { return comm_ == nullptr; }
  // ddp-ft in a group: members may fail and join (hmcrun --restart=on-failure, -np MIN:MAX).
  // The epoch loop then follows the group's step count, a rank that joins downloads the
  // parameters, optimizer state and step count and takes up the epoch the group is in, and
  // nothing outside the averaging is collective: SumOverRanks returns this rank's values, each
  // rank evaluates the whole test set itself (inside an epoch, --eval_every, only the one that
  // reports), and the reports are rank 0's.
  bool elastic() const { return comm_ != nullptr && settings_.sync == "ddp-ft"; }
  // Whether this rank prints the reports: rank 0, of the current epoch where elastic.
  bool reports() const { return (elastic() ? comm_->rank() : rank_) == 0; }
  const std::string& sync() const { return settings_.sync; }

  // Makes every replica start equal and sets up averaging; call once with the model built.
  // Resumes from the checkpoint when there is one.
  void Attach(torch::nn::Module& model, torch::optim::Optimizer& optimizer);
  using Metrics = std::vector<std::pair<std::string, double>>;
  // The training loop, from the epoch Attach resumes at up to `epochs` (exclusive). Each epoch
  // trains on `epoch_samples` (over the group) in local batches of `local_batch`:
  // `train_batch(epoch, slot)` runs forward and backward on local batch number `slot` of an
  // endless stream shared by the ranks (rank r takes slots r, r + world, r + 2·world, ...) and
  // returns its mean loss; gradients are zeroed before and averaged and stepped after. With
  // ddp/reducer that is one step per global batch (local_batch · world samples), so the run
  // equals one process with that batch; with collab the epoch is epoch_samples / target_batch
  // group steps, each rank processing batches at its own speed. Then `evaluate()` (collective)
  // measures the model (diloco: the outer parameters, the group's model), the epoch is reported
  // (rank 0's stdout and the JSON lines: the group's samples/s, mean loss, bytes inside and across
  // zones and their egress cost, and the metrics) and checkpointed. At the end a delayed update
  // still in flight is applied.
  void Train(int epochs, int64_t epoch_samples, int64_t local_batch,
             const std::function<double(int epoch, int64_t slot)>& train_batch,
             const std::function<Metrics()>& evaluate);
  // This rank's share of a global batch; throws when it does not split evenly.
  int64_t LocalBatch(int64_t global_batch) const;
  // Sum over ranks of `values` (exact, f64); a copy when alone or elastic.
  std::vector<double> SumOverRanks(std::vector<double> values);
  // How an evaluation splits its data before SumOverRanks: this rank takes part `shard` of
  // `shards`. Elastic: every rank all of it, since nothing is summed.
  struct EvaluationShare {
    int shard;
    int shards;
  };
  EvaluationShare evaluation_share() const {
    return elastic() ? EvaluationShare{0, 1} : EvaluationShare{rank_, world_};
  }

 private:
  struct EpochStats {
    double loss_sum = 0;  // This rank's: sample-weighted.
    int64_t samples = 0;  // This rank's.
    double seconds = 0;
  };

  TrainingRun(Settings settings, std::shared_ptr<Communicator> comm);
  // The samples of one group step: the global batch (ddp, ddp-ft, ...) or the target batch
  // (collab). An epoch of epoch_samples takes epoch_samples / StepSamples(local_batch) steps.
  int64_t StepSamples(int64_t local_batch) const;
  EpochStats TrainEpoch(int epoch, int64_t epoch_samples, int64_t local_batch,
                        const std::function<double(int epoch, int64_t slot)>& train_batch,
                        const std::function<Metrics()>& evaluate);
  // `evaluate()` on the group's model (diloco: the outer parameters).
  Metrics EvaluateModel(const std::function<Metrics()>& evaluate);
  // Rank 0 prints and appends to the JSON lines one evaluation inside an epoch.
  void ReportEvaluation(int64_t step, double samples, double train_seconds, const Metrics& fields);
  void ReportEpoch(int epoch, const EpochStats& stats, const Metrics& fields);
  // ", name value" to a report's line and ", "name": value" to its JSON, for every field.
  static void AppendMetrics(const Metrics& fields, std::string& line, std::string& json);
  // Prints a report's line and appends its JSON to the JSON lines (rank 0's).
  void Publish(const std::string& line, const std::string& json) const;
  // Rank 0 saves the model, optimizer and next epoch (atomically: a temporary, then rename);
  // diloco: with the outer state, and every other rank its own model and inner optimizer.
  void SaveCheckpoint(int next_epoch);
  // Loads a checkpoint's model and optimizer; returns its next epoch.
  int64_t LoadCheckpoint(torch::serialize::InputArchive& archive);
  // Rank 0's file is the --checkpoint path; another rank's (diloco) has ".rank<N>" appended.
  std::string CheckpointPathOf(int rank) const;
  // The outer state from rank 0's checkpoint (`checkpoint`, read by Attach; null where this
  // rank has none), then this rank's own parameters and optimizer.
  void ResumeDiLoCo(torch::serialize::InputArchive* checkpoint);
  // After backward on a local batch of `samples`: averages and steps (ddp), or folds the batch
  // into the group's round and steps with it (collab). True when the optimizer stepped.
  bool Step(int64_t samples);
  ddp::Traffic traffic() const;

  Settings settings_;
  std::shared_ptr<Communicator> comm_;
  int rank_ = 0;
  int world_ = 1;
  torch::nn::Module* model_ = nullptr;
  torch::optim::Optimizer* optimizer_ = nullptr;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  std::shared_ptr<c10d::Reducer> reducer_;
  ddp::AveragingCommHook* hook_ = nullptr;  // Owned by reducer_.
  std::unique_ptr<ddp::CollaborativeOptimizer> collab_;
  std::unique_ptr<ddp::DiLoCo> diloco_;
  int first_epoch_ = 0;  // Where Attach resumed.
  ddp::Traffic reported_;
  int64_t steps_ = 0;
  int64_t reported_steps_ = 0;
  double train_seconds_ = 0;  // Since the run (or its resumption) began, evaluations excluded.
  double group_samples_ = 0;  // Elastic: samples the committed steps averaged, this epoch.
  int64_t skipped_ = 0;       // Elastic: steps given up on every rank, this epoch.
};

// The value, or a std::runtime_error with the status's message.
template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) throw std::runtime_error(std::string(value.status().message()));
  return *std::move(value);
}

}  // namespace hmc::examples

#endif  // HMC_EXAMPLES_COMMON_TRAINING_RUN_H_
