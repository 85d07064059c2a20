#include "examples/common/training_run.h"

#include <torch/serialize.h>
#include <torch/utils.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/fnv.h"
#include "ddp/hmc_reducer.h"
#include "ddp/optimizer_state.h"
#include "ddp/tensor_interop.h"
#include "launcher/progress_line.h"

namespace hmc::examples {

TrainingRun::TrainingRun(Settings settings, std::shared_ptr<Communicator> comm)
    : settings_(std::move(settings)), comm_(std::move(comm)) {}

absl::StatusOr<std::unique_ptr<TrainingRun>> TrainingRun::Start(const Settings& settings) {
  int threads = settings.threads;
  if (threads <= 0) {
    int ranks_here = 1;
    if (const char* local = std::getenv("HMC_LOCAL_SIZE"); local != nullptr) {
      if (!absl::SimpleAtoi(local, &ranks_here) || ranks_here < 1) ranks_here = 1;
    }
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here);
  }
  // libtorch defaults to one thread here; set it explicitly either way.
  torch::set_num_threads(threads);
  if (settings.sync != "ddp" && settings.sync != "ddp-ft" && settings.sync != "reducer" &&
      settings.sync != "collab" && settings.sync != "diloco" && settings.sync != "local") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync=", settings.sync, ": ddp, ddp-ft, reducer, collab, diloco or local"));
  }
  if (settings.eval_every > 0 && settings.sync == "collab") {
    return absl::InvalidArgumentError(
        "--eval_every with --sync=collab: its ranks step unevenly, so they cannot evaluate "
        "together inside an epoch");
  }
  const char* coordinator = std::getenv("HMC_COORDINATOR");
  if (coordinator == nullptr || *coordinator == '\0') {
    return std::unique_ptr<TrainingRun>(new TrainingRun(settings, nullptr));
  }
  absl::StatusOr<Options> options = Options::FromEnvironment();
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(*options);
  if (!comm.ok()) return comm.status();
  auto run = std::unique_ptr<TrainingRun>(new TrainingRun(settings, std::move(*comm)));
  run->rank_ = run->comm_->rank();
  run->world_ = run->comm_->size();
  // Elastic: the batch and the epoch's steps follow the size the job was started with, which a
  // rank that joins later knows too.
  if (run->elastic() && options->world_size > 0)
    run->world_ = static_cast<int>(options->world_size);
  return run;
}

void TrainingRun::Attach(torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  model_ = &model;
  optimizer_ = &optimizer;
  int64_t first_epoch = 0;
  const std::string& path = settings_.checkpoint_path;
  // Kept for DiLoCo's resumption, which reads its outer state from the same file.
  std::optional<torch::serialize::InputArchive> checkpoint;
  if (!path.empty() && std::filesystem::exists(path)) {
    checkpoint.emplace();
    checkpoint->load_from(path);
    first_epoch = LoadCheckpoint(*checkpoint);
    if (rank_ == 0)
      std::printf("resumed from %s at epoch %lld\n", path.c_str(),
                  static_cast<long long>(first_epoch + 1));
  }
  first_epoch_ = static_cast<int>(first_epoch);
  if (alone()) return;
  if (elastic() && comm_->joined_running_group()) {
    // It takes the group's state, and its epoch, in its first step (the DDP helper downloads
    // the parameters instead of taking rank 0's).
    first_epoch_ = 0;
  } else {
    // Rank 0's checkpoint decides (another host may lack the file); parameters follow from
    // rank 0 when averaging is set up.
    Buffer epoch{&first_epoch, 1, DType::kI64};
    ddp::ThrowIfError(comm_->Broadcast(epoch, epoch, 0)->Wait());
    first_epoch_ = static_cast<int>(first_epoch);
  }
  ddp::AveragingOptions averaging{.codec_inter = settings_.codec_inter,
                                  .codec_intra = settings_.codec_intra};
  if (settings_.sync == "ddp" || settings_.sync == "ddp-ft") {
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(
        comm_, model.parameters(),
        ddp::DdpOptions{.bucket_bytes = settings_.bucket_bytes,
                        .averaging = averaging,
                        .fault_tolerant = settings_.sync == "ddp-ft"});
    if (elastic()) ddp_->ShareState(ddp::MaterializeOptimizerState(optimizer));
  } else if (settings_.sync == "reducer") {
    ddp::HmcReducer made =
        ddp::MakeReducer(comm_, model.parameters(), settings_.bucket_bytes, averaging);
    reducer_ = made.reducer;
    hook_ = made.hook;
  } else if (settings_.sync == "collab") {
    collab_ = std::make_unique<ddp::CollaborativeOptimizer>(
        comm_, model.parameters(), optimizer,
        ddp::CollaborativeOptions{.target_batch_size = settings_.target_batch,
                                  .averaging = averaging,
                                  .delay_updates = settings_.delay_updates,
                                  .base_batch_size = settings_.base_batch,
                                  .lr_scaling_power = settings_.lr_scaling_power,
                                  .warmup_rounds = settings_.warmup_rounds});
  } else if (settings_.sync == "diloco") {
    // int8 pseudo-gradients unless a codec is named.
    const ddp::AveragingOptions defaults = ddp::DiLoCoOptions{}.averaging;
    diloco_ = std::make_unique<ddp::DiLoCo>(
        comm_, model.parameters(),
        ddp::DiLoCoOptions{
            .inner_steps = settings_.inner_steps,
            .outer_lr = settings_.outer_lr,
            .outer_momentum = settings_.outer_momentum,
            .averaging = {.codec_inter = settings_.codec_inter.empty() ? defaults.codec_inter
                                                                       : settings_.codec_inter,
                          .codec_intra = settings_.codec_intra.empty() ? defaults.codec_intra
                                                                       : settings_.codec_intra},
            .fragments = settings_.fragments});
    if (first_epoch_ > 0) ResumeDiLoCo(checkpoint.has_value() ? &*checkpoint : nullptr);
  }
}

int64_t TrainingRun::LoadCheckpoint(torch::serialize::InputArchive& archive) {
  torch::serialize::InputArchive model_archive, optimizer_archive;
  archive.read("model", model_archive);
  archive.read("optimizer", optimizer_archive);
  model_->load(model_archive);
  optimizer_->load(optimizer_archive);
  torch::Tensor next;
  archive.read("next_epoch", next);
  return next.item<int64_t>();
}

std::string TrainingRun::CheckpointPathOf(int rank) const {
  return rank == 0 ? settings_.checkpoint_path
                   : absl::StrCat(settings_.checkpoint_path, ".rank", rank);
}

void TrainingRun::ResumeDiLoCo(torch::serialize::InputArchive* checkpoint) {
  // Rank 0's checkpoint holds the group's outer state; a checkpoint without it (another --sync)
  // starts the outer optimizer afresh from its parameters.
  std::optional<torch::serialize::InputArchive> outer;
  if (rank_ == 0 && checkpoint != nullptr) {
    outer.emplace();
    if (!checkpoint->try_read("diloco", *outer)) outer.reset();
  }
  diloco_->Restore(outer.has_value() ? &*outer : nullptr);
  // Each rank's own parameters (its steps since the last sync) and inner optimizer, where it kept
  // them at the same epoch; otherwise it goes on from the outer parameters. Read again from the
  // file, rank 0's too: parameters loaded from an archive share its tensors' storage, which
  // Restore has just overwritten with the outer parameters.
  const std::string own = CheckpointPathOf(rank_);
  if (std::filesystem::exists(own)) {
    torch::serialize::InputArchive archive;
    archive.load_from(own);
    if (LoadCheckpoint(archive) == first_epoch_) return;
  }
  std::printf("rank %d: no checkpoint of its own at epoch %d (%s): continues from the group's\n",
              rank_, first_epoch_, own.c_str());
}

bool TrainingRun::Step(int64_t samples) {
  bool stepped = true;
  if (collab_ != nullptr) {
    stepped = collab_->Step(samples);
  } else {
    // The reducer already averaged during backward.
    if (ddp_ != nullptr) {
      try {
        ddp_->FinishBackward();
      } catch (const c10::Error& e) {
        // Fault tolerant: a step whose averaging failed on every survivor is skipped by all.
        if (settings_.sync != "ddp-ft" ||
            std::string(e.what()).find("membership changed") == std::string::npos) {
          throw;
        }
        std::fprintf(stderr, "rank %d: step skipped: %s\n", comm_->id(), e.what());
        ++skipped_;
        return false;
      }
    }
    if (elastic()) {
      group_samples_ += ddp_->last_step().total_weight;
      // Adam's step count lives outside its tensors: the group's, for a rank that joined.
      ddp::SetOptimizerSteps(*optimizer_, ddp_->step() - 1);
    }
    optimizer_->step();
    if (diloco_ != nullptr) diloco_->AfterInnerStep(static_cast<double>(samples));
  }
  if (stepped) ++steps_;
  return stepped;
}

int64_t TrainingRun::LocalBatch(int64_t global_batch) const {
  if (global_batch % world_ != 0) {
    throw std::runtime_error(
        absl::StrFormat("--batch=%d does not split over %d ranks", global_batch, world_));
  }
  return global_batch / world_;
}

int64_t TrainingRun::StepSamples(int64_t local_batch) const {
  return collab_ != nullptr ? settings_.target_batch : local_batch * world_;
}

void TrainingRun::Train(int epochs, int64_t epoch_samples, int64_t local_batch,
                        const std::function<double(int epoch, int64_t slot)>& train_batch,
                        const std::function<Metrics()>& evaluate) {
  // An epoch shorter than one step would train nothing and report the mean loss of no sample.
  const int64_t step_samples = StepSamples(local_batch);
  const int64_t steps = epoch_samples / step_samples;
  if (steps == 0) {
    throw std::runtime_error(absl::StrFormat(
        "an epoch of %d samples holds no step of %d samples (%s): give it more samples or take "
        "a smaller batch",
        epoch_samples, step_samples, collab_ != nullptr ? "--target_batch" : "--batch"));
  }
  for (int epoch = first_epoch_; epoch < epochs; ++epoch) {
    const EpochStats stats = TrainEpoch(epoch, epoch_samples, local_batch, train_batch, evaluate);
    // A rank that joined learns the group's step in its first step: epochs it missed are over.
    if (elastic() && ddp_->step() > (epoch + 1) * steps) {
      continue;
    }
    ReportEpoch(epoch, stats, EvaluateModel(evaluate));
    SaveCheckpoint(epoch + 1);
  }
  if (collab_ != nullptr) collab_->Finish();
  if (diloco_ != nullptr) diloco_->Finish();
}

TrainingRun::EpochStats TrainingRun::TrainEpoch(
    int epoch, int64_t epoch_samples, int64_t local_batch,
    const std::function<double(int epoch, int64_t slot)>& train_batch,
    const std::function<Metrics()>& evaluate) {
  EpochStats stats;
  const absl::Time start = absl::Now();
  absl::Duration evaluating;  // Inside the epoch (--eval_every): not training time.
  std::optional<ProgressLine> progress;
  if (settings_.progress && reports()) progress.emplace(stdout, settings_.progress_in_place);
  // This rank's share of the epoch, in local batches (collab: about that many).
  const int64_t batches = std::max<int64_t>(1, epoch_samples / (local_batch * world_));
  const uint64_t sent_before = traffic().bytes_sent;
  auto train = [&](int64_t slot) {
    optimizer_->zero_grad();
    // Fault tolerant: the step's round begins with backward's first bucket, with this weight.
    if (ddp_ != nullptr) ddp_->set_samples(static_cast<double>(local_batch));
    if (reducer_ != nullptr) {
      reducer_->prepare_for_forward();
      reducer_->prepare_for_backward({});
    }
    stats.loss_sum += train_batch(epoch, slot) * static_cast<double>(local_batch);
    stats.samples += local_batch;
    const bool stepped = Step(local_batch);
    const absl::Time now = absl::Now();
    if (progress.has_value() && progress->Due(now)) {
      const double seconds = absl::ToDoubleSeconds(now - start);
      const int64_t done = stats.samples / local_batch;
      progress->Show(absl::StrFormat(
                         "epoch %d: batch %d/%d, %.0f samples/s, loss %.4f, sent %.1f MB, "
                         "%.0f s left",
                         epoch + 1, done, batches, stats.samples * world_ / seconds,
                         stats.loss_sum / stats.samples, (traffic().bytes_sent - sent_before) / 1e6,
                         seconds / done * std::max<int64_t>(0, batches - done)),
                     now);
    }
    return stepped;
  };
  // After the run's step `done` (--eval_every); the epoch's last step is evaluated by the
  // epoch's report. Elastic: only the member that reports evaluates (below).
  auto evaluate_inside = [&](int64_t done, bool last_of_epoch) {
    if (settings_.eval_every <= 0 || done % settings_.eval_every != 0 || last_of_epoch) return;
    if (elastic() && !reports()) return;
    const absl::Time paused = absl::Now();
    if (progress.has_value()) progress->Clear();
    ReportEvaluation(done, static_cast<double>(done * local_batch * world_),
                     train_seconds_ + absl::ToDoubleSeconds(paused - start - evaluating),
                     EvaluateModel(evaluate));
    evaluating += absl::Now() - paused;
  };
  const int64_t steps = epoch_samples / StepSamples(local_batch);  // The group's, this epoch.
  if (elastic()) {
    // The group's step count ends the epoch: every rank, a joiner too, sees the same one. Each
    // step's batch is the members' slots of it, by their rank in the current epoch. Inside the
    // epoch only the member that reports evaluates (the whole test set; nothing collective): the
    // others wait for it in their next round. Had every member evaluated, the reporter would
    // count the wait for the slowest one's evaluation as training.
    const int64_t end = (epoch + 1) * steps;
    for (int64_t tries = 0; ddp_->step() < end && tries < 4 * steps + 100; ++tries) {
      if (train(ddp_->step() * comm_->size() + comm_->rank())) {
        evaluate_inside(ddp_->step(), ddp_->step() == end);
      }
    }
  } else if (collab_ == nullptr) {
    for (int64_t step = 0; step < steps; ++step) {
      train(step * world_ + rank_);
      evaluate_inside(epoch * steps + step + 1, step + 1 == steps);
    }
  } else {
    // The group's step count ends the epoch; every rank sees the same one.
    for (int64_t k = 0, taken = 0; taken < steps; ++k) {
      if (train(k * world_ + rank_)) ++taken;
    }
  }
  stats.seconds = absl::ToDoubleSeconds(absl::Now() - start - evaluating);
  train_seconds_ += stats.seconds;
  if (progress.has_value()) progress->Clear();  // The epoch's own line comes next.
  return stats;
}

TrainingRun::Metrics TrainingRun::EvaluateModel(const std::function<Metrics()>& evaluate) {
  Metrics metrics;
  if (diloco_ != nullptr) {
    diloco_->WithOuterParameters([&] { metrics = evaluate(); });
  } else {
    metrics = evaluate();
  }
  return metrics;
}

void TrainingRun::ReportEvaluation(int64_t step, double samples, double train_seconds,
                                   const Metrics& fields) {
  if (!reports()) return;
  std::string line = absl::StrFormat("step %lld: %.0f samples, %.1f s of training",
                                     static_cast<long long>(step), samples, train_seconds);
  std::string json = absl::StrFormat(
      "{\"eval_step\": %lld, \"sync\": \"%s\", \"samples\": %.0f, "
      "\"train_seconds\": %.3f",
      static_cast<long long>(step), settings_.sync, samples, train_seconds);
  AppendMetrics(fields, line, json);
  Publish(line, json + "}");
}

void TrainingRun::AppendMetrics(const Metrics& fields, std::string& line, std::string& json) {
  for (const auto& [name, value] : fields) {
    absl::StrAppendFormat(&line, ", %s %.4g", name, value);
    absl::StrAppendFormat(&json, ", \"%s\": %.6g", name, value);
  }
}

void TrainingRun::Publish(const std::string& line, const std::string& json) const {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (!settings_.json_path.empty())
    std::ofstream(settings_.json_path, std::ios::app) << json << "\n";
}

ddp::Traffic TrainingRun::traffic() const {
  if (ddp_ != nullptr) return ddp_->traffic();
  if (hook_ != nullptr) return hook_->traffic();
  if (collab_ != nullptr) return collab_->traffic();
  if (diloco_ != nullptr) return diloco_->traffic();
  return {};
}

std::vector<double> TrainingRun::SumOverRanks(std::vector<double> values) {
  if (alone() || elastic()) return values;
  Buffer b{values.data(), values.size(), DType::kF64};
  ddp::ThrowIfError(comm_->AllReduce(b, b, ReduceOp::kSum, {.algo = "ring"})->Wait());
  return values;
}

void TrainingRun::ReportEpoch(int epoch, const EpochStats& stats, const Metrics& fields) {
  const ddp::Traffic now = traffic();
  const ddp::Traffic delta = now - reported_;
  reported_ = now;
  const int64_t steps = steps_ - reported_steps_;
  reported_steps_ = steps_;
  // The group's bytes and cost: every rank's sends, summed (elastic: estimated from this rank's,
  // below, and the samples the group's steps averaged).
  std::vector<double> group = SumOverRanks(
      {static_cast<double>(stats.samples),
       static_cast<double>(delta.bytes_sent - delta.bytes_sent_across_zones),
       static_cast<double>(delta.bytes_sent_across_zones), delta.egress_usd, stats.loss_sum});
  std::string membership;
  if (elastic()) {
    group[4] *= group_samples_ / std::max(group[0], 1.0);  // This rank's mean loss.
    group[0] = group_samples_;
    // Nothing outside the averaging is collective in an elastic run, so the group's bytes and
    // cost are estimated as this rank's times the members: the averaging's algorithms send alike
    // from every member (ddp-ft's report read a quarter of ddp's on 4 ranks before).
    for (int k : {1, 2, 3}) group[k] *= comm_->size();
    // Every rank, to show that they hold the same parameters (a joiner included).
    uint64_t hash = kFnv1aOffset;
    for (const at::Tensor& p : model_->parameters()) {
      const at::Tensor c = p.detach().contiguous();
      hash = Fnv1a(c.data_ptr(), c.nbytes(), hash);
    }
    std::printf("rank %d: epoch %d ends at step %lld, parameters %016llx\n", comm_->id(), epoch + 1,
                static_cast<long long>(ddp_->step()), static_cast<unsigned long long>(hash));
    std::fflush(stdout);
    membership = absl::StrFormat(
        ", \"membership_epoch\": %d, \"members\": %d, \"skipped_steps\": %d, \"group_step\": %d, "
        "\"parameters\": \"%016x\"",
        comm_->epoch(), comm_->size(), skipped_, ddp_->step(), hash);
    group_samples_ = 0;
    skipped_ = 0;
  }
  if (!reports()) return;
  const double seconds = stats.seconds;
  std::vector<std::pair<std::string, double>> all_fields = {{"loss", group[4] / group[0]}};
  all_fields.insert(all_fields.end(), fields.begin(), fields.end());
  std::string line =
      absl::StrFormat("epoch %d: %.0f samples in %.1f s (%.0f samples/s), %lld steps", epoch + 1,
                      group[0], seconds, group[0] / seconds, static_cast<long long>(steps));
  std::string json = absl::StrFormat(
      "{\"epoch\": %d, \"world\": %d, \"sync\": \"%s\", \"samples\": %.0f, \"seconds\": %.3f, "
      "\"samples_per_s\": %.1f, \"steps\": %lld, \"train_seconds\": %.3f%s",
      epoch + 1, world_, settings_.sync, group[0], seconds, group[0] / seconds,
      static_cast<long long>(steps), train_seconds_, membership);
  AppendMetrics(all_fields, line, json);
  absl::StrAppendFormat(&line, ", sent in zones %.1f MB, across zones %.1f MB, egress $%.4f%s",
                        group[1] / 1e6, group[2] / 1e6, group[3],
                        elastic() ? " (this rank's times the members)" : "");
  absl::StrAppendFormat(&json,
                        ", \"bytes_in_zones\": %.0f, \"bytes_across_zones\": %.0f, "
                        "\"egress_usd\": %.6f}",
                        group[1], group[2], group[3]);
  Publish(line, json);
}

void TrainingRun::SaveCheckpoint(int next_epoch) {
  const int rank = elastic() ? comm_->rank() : rank_;  // Ranks are renumbered as members change.
  // DiLoCo: between syncs each rank's parameters and inner optimizer are its own, so every rank
  // keeps a file; rank 0's holds the group's outer state as well.
  if (settings_.checkpoint_path.empty() || (rank != 0 && diloco_ == nullptr)) return;
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  model_->save(model_archive);
  optimizer_->save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("next_epoch", torch::tensor(static_cast<int64_t>(next_epoch)));
  if (diloco_ != nullptr && rank == 0) {
    torch::serialize::OutputArchive outer;
    diloco_->Save(outer);
    archive.write("diloco", outer);
  }
  const std::string path = CheckpointPathOf(rank);
  const std::string temporary = path + ".tmp";
  archive.save_to(temporary);
  std::filesystem::rename(temporary, path);
}

}  // namespace hmc::examples
