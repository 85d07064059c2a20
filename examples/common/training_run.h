#ifndef HMC_EXAMPLES_COMMON_TRAINING_RUN_H_
#define HMC_EXAMPLES_COMMON_TRAINING_RUN_H_

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/communicator.h"
#include "ddp/averaging_hook.h"
#include "ddp/collaborative_optimizer.h"
#include "ddp/distributed_data_parallel.h"

namespace c10d {
class Reducer;
}

namespace hmc::examples {

// What the two training examples share: joining the group when started by hmcrun (alone
// otherwise), averaging gradients, per-epoch reports with traffic and egress, and checkpoints.
class TrainingRun {
 public:
  struct Settings {
    // ddp: average every step with the DDP helper; reducer: the same through libtorch's
    // c10d::Reducer with hmc's comm hook; collab: collaborative optimizer; local: no averaging
    // at all (each rank trains alone: the baseline of the overhead benchmark).
    std::string sync = "ddp";
    int64_t target_batch = 0;  // collab: samples the group processes per optimizer step.
    bool delay_updates = false;
    std::string codec_inter;  // Empty: the communicator's option.
    std::string codec_intra;
    std::string json_path;        // Per-epoch JSON lines; empty: none.
    std::string checkpoint_path;  // Saved each epoch by rank 0, resumed when present.
    int threads = 0;              // Torch intra-op threads; 0: cores / ranks on this host.
    size_t bucket_bytes = ddp::DdpOptions{}.bucket_bytes;  // ddp and reducer buckets.
  };

  // Joins the group when HMC_COORDINATOR is set (as hmcrun sets it), else runs alone.
  static absl::StatusOr<std::unique_ptr<TrainingRun>> Start(const Settings& settings);

  int rank() const { return rank_; }
  int world() const { return world_; }
  const std::string& zone() const { return zone_; }
  bool alone() const { return comm_ == nullptr; }
  const std::string& sync() const { return settings_.sync; }

  // Makes every replica start equal and sets up averaging; call once with the model built.
  // Resumes from the checkpoint when there is one: returns the first epoch to run.
  int Attach(torch::nn::Module& model, torch::optim::Optimizer& optimizer);
  struct EpochStats {
    double loss_sum = 0;  // This rank's: sample-weighted.
    int64_t samples = 0;  // This rank's.
    double seconds = 0;
  };
  // Trains one epoch of `epoch_samples` (over the group) in local batches of `local_batch`.
  // `train_batch(slot)` runs forward and backward on local batch number `slot` of an endless
  // stream shared by the ranks (rank r takes slots r, r + world, r + 2·world, ...) and returns
  // its mean loss; the optimizer is zeroed before and stepped after, with gradients averaged.
  // ddp: one step per global batch (local_batch · world samples), so the run equals one
  // process with that batch. collab: the epoch is epoch_samples / target_batch group steps;
  // each rank processes batches at its own speed until the group has taken them.
  EpochStats TrainEpoch(int64_t epoch_samples, int64_t local_batch,
                        const std::function<double(int64_t slot)>& train_batch);
  // End of training: applies a delayed update still in flight.
  void Finish();

  // Sum over ranks of `values` (exact, f64); a copy when alone.
  std::vector<double> SumOverRanks(std::vector<double> values);
  // Prints the epoch's line (rank 0) and appends it to the JSON file: the group's samples/s,
  // mean training loss, bytes sent inside and across zones and their egress cost since the last
  // report, and `fields` (e.g. {"test_accuracy", 0.9}). Collective: every rank calls it.
  void ReportEpoch(int epoch, const EpochStats& stats,
                   const std::vector<std::pair<std::string, double>>& fields);
  // Rank 0 saves the model, optimizer and next epoch (atomically: a temporary, then rename).
  void SaveCheckpoint(int next_epoch);

 private:
  TrainingRun(Settings settings, std::shared_ptr<Communicator> comm);
  // After backward on a local batch of `samples`: averages and steps (ddp), or folds the batch
  // into the group's round and steps with it (collab). True when the optimizer stepped.
  bool Step(int64_t samples);
  ddp::Traffic traffic() const;

  Settings settings_;
  std::shared_ptr<Communicator> comm_;
  int rank_ = 0;
  int world_ = 1;
  std::string zone_ = "local";
  torch::nn::Module* model_ = nullptr;
  torch::optim::Optimizer* optimizer_ = nullptr;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  std::shared_ptr<c10d::Reducer> reducer_;
  ddp::AveragingCommHook* hook_ = nullptr;  // Owned by reducer_.
  std::unique_ptr<ddp::CollaborativeOptimizer> collab_;
  ddp::Traffic reported_;
  int64_t steps_ = 0;
  int64_t reported_steps_ = 0;
};

}  // namespace hmc::examples

#endif  // HMC_EXAMPLES_COMMON_TRAINING_RUN_H_
