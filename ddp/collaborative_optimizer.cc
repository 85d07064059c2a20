#include "ddp/collaborative_optimizer.h"

#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "ddp/optimizer_state.h"
#include "ddp/tensor_interop.h"
#include "ddp/work_future.h"

namespace hmc::ddp {

CollaborativeOptimizer::CollaborativeOptimizer(std::shared_ptr<Communicator> comm,
                                               std::vector<at::Tensor> parameters,
                                               torch::optim::Optimizer& optimizer,
                                               CollaborativeOptions options)
    : comm_(comm),
      parameters_(Trainable(parameters)),
      optimizer_(optimizer),
      options_(std::move(options)),
      averager_(comm, options_.averaging),
      state_(parameters_) {
  TORCH_CHECK(options_.target_batch_size > 0, "hmc: target_batch_size must be positive");
  int64_t numel = 0;
  for (at::Tensor& p : parameters_) {
    TORCH_CHECK(p.scalar_type() == at::kFloat,
                "hmc: the collaborative optimizer takes f32 "
                "parameters");
    numel += p.numel();
  }
  const bool joined = comm_->joined_running_group();
  TORCH_CHECK(!joined || options_.fault_tolerant,
              "hmc: this peer joined a running group, which only a fault-tolerant collaborative "
              "optimizer can take");
  TORCH_CHECK(!options_.fault_tolerant || !options_.delay_updates,
              "hmc: fault-tolerant collaborative rounds do not delay updates");
  if (!joined) BroadcastFromRankZero(*comm_, parameters_);  // A joiner downloads them.
  accumulated_ = at::zeros({numel}, at::kFloat);
  if (options_.fault_tolerant) state_.Share(MaterializeOptimizerState(optimizer_));
  TORCH_CHECK(options_.base_batch_size >= 0 && options_.warmup_rounds >= 0,
              "hmc: base_batch_size and warmup_rounds must not be negative");
  for (const torch::optim::OptimizerParamGroup& group : optimizer_.param_groups()) {
    tuned_learning_rates_.push_back(group.options().get_lr());
  }
  ThrowIfError(Publish({.round = round(), .at = absl::Now()}));
  progress_ = std::thread([this] { TrackProgress(); });
}

CollaborativeOptimizer::~CollaborativeOptimizer() {
  stop_.Notify();
  progress_.join();
}

std::string CollaborativeOptimizer::ProgressKey(int id) const {
  return absl::StrCat("collab/", options_.run, "/", id);
}

absl::Status CollaborativeOptimizer::Publish(const Progress& progress) {
  return comm_->PutKey(
      ProgressKey(comm_->id()),
      absl::StrFormat("%d %d %.6g %d %d", progress.round, progress.samples, progress.samples_per_s,
                      progress.closed ? 1 : 0, absl::ToUnixMillis(progress.at)));
}

std::optional<CollaborativeOptimizer::Progress> CollaborativeOptimizer::ParseProgress(
    absl::string_view value) {
  const std::vector<absl::string_view> fields = absl::StrSplit(value, ' ');
  Progress p;
  int closed;
  int64_t millis;
  if (fields.size() != 5 || !absl::SimpleAtoi(fields[0], &p.round) ||
      !absl::SimpleAtoi(fields[1], &p.samples) || !absl::SimpleAtod(fields[2], &p.samples_per_s) ||
      !absl::SimpleAtoi(fields[3], &closed) || !absl::SimpleAtoi(fields[4], &millis) ||
      p.samples < 0 || !(p.samples_per_s >= 0) || !std::isfinite(p.samples_per_s)) {
    return std::nullopt;
  }
  p.closed = closed != 0;
  p.at = absl::FromUnixMillis(millis);
  return p;
}

int64_t CollaborativeOptimizer::round() const {
  MutexLock lock(&mu_);
  return round_;
}

int64_t CollaborativeOptimizer::PredictedOthers(absl::Time now) const {
  // What is read lags by up to a publishing interval, a reading interval and the round trip to
  // the coordinator: a count is extrapolated no further, so that a peer that stalled (or a clock
  // that is behind) adds at most that much of its rate.
  const double most = absl::ToDoubleSeconds(2 * options_.progress_interval + read_round_trip_);
  auto extrapolated = [&](const Progress& p, absl::Time since) {
    return p.samples_per_s * std::clamp(absl::ToDoubleSeconds(now - since), 0.0, most);
  };
  double predicted = 0;
  for (const Progress& p : others_) {
    if (p.round > round_) {
      // The peer is past this round: the group ended it.
      return std::numeric_limits<int64_t>::max() / 2;
    }
    if (p.round == round_) {
      predicted += static_cast<double>(p.samples) + (p.closed ? 0.0 : extrapolated(p, p.at));
    } else {
      // Not seen in this round yet (its news is a round trip away): at its rate since this
      // peer began the round.
      predicted += extrapolated(p, std::max(p.at, round_began_));
    }
  }
  return static_cast<int64_t>(predicted);
}

// Publishes this peer's progress when its count changes (the time is the count's) and reads the
// other members'; one that has not begun the round yet counts as 0 until it does.
void CollaborativeOptimizer::TrackProgress() {
  Progress published;
  while (!stop_.WaitForNotificationWithTimeout(options_.progress_interval)) {
    const Progress mine{round(), local_samples_.load(), samples_per_s_.load(), round_closed_.load(),
                        absl::Now()};
    if (mine.round != published.round || mine.samples != published.samples ||
        mine.closed != published.closed) {
      if (!Publish(mine).ok()) return;
      published = mine;
    }
    // Every other member's progress in one round trip to the coordinator (a peer that left the
    // group no longer counts).
    std::vector<std::string> keys;
    for (const PeerEntry& member : comm_->peers().peers) {
      if (member.rank != comm_->id()) keys.push_back(ProgressKey(member.rank));
    }
    std::vector<Progress> others;
    const absl::Time asked = absl::Now();
    for (const absl::StatusOr<std::string>& value :
         comm_->GetKeys(keys, asked + options_.progress_interval)) {
      std::optional<Progress> theirs = value.ok() ? ParseProgress(*value) : std::nullopt;
      if (theirs.has_value()) others.push_back(*theirs);
    }
    const absl::Duration round_trip = absl::Now() - asked;
    MutexLock lock(&mu_);
    read_round_trip_ = round_trip;
    others_ = std::move(others);
  }
}

void CollaborativeOptimizer::ScaleLearningRates() {
  if (options_.base_batch_size == 0) return;
  const double scale = std::pow(static_cast<double>(options_.target_batch_size) /
                                    static_cast<double>(options_.base_batch_size),
                                options_.lr_scaling_power);
  const int64_t done = options_.fault_tolerant ? state_.step() : steps_;
  const double ramp = options_.warmup_rounds > 0
                          ? std::min(1.0, static_cast<double>(done + 1) /
                                              static_cast<double>(options_.warmup_rounds))
                          : 1.0;
  std::vector<torch::optim::OptimizerParamGroup>& groups = optimizer_.param_groups();
  for (size_t g = 0; g < groups.size() && g < tuned_learning_rates_.size(); ++g) {
    groups[g].options().set_lr(tuned_learning_rates_[g] * (1 + (scale - 1) * ramp));
  }
}

bool CollaborativeOptimizer::Step(int64_t samples) {
  TORCH_CHECK(samples > 0, "hmc: Step needs the batch's sample count");
  int64_t offset = 0;
  for (at::Tensor& p : parameters_) {
    const int64_t n = p.numel();
    if (p.grad().defined()) {
      accumulated_.narrow(0, offset, n).add_(p.grad().reshape({-1}), static_cast<double>(samples));
      p.mutable_grad().zero_();
    }
    offset += n;
  }
  local_samples_ += samples;
  // The rate of local batches (the time between two Steps, a group step's own time left out).
  const absl::Time now = absl::Now();
  if (last_batch_at_ != absl::InfinitePast() && now > last_batch_at_) {
    const double rate = static_cast<double>(samples) / absl::ToDoubleSeconds(now - last_batch_at_);
    const double smoothed = samples_per_s_.load();
    samples_per_s_.store(smoothed == 0 ? rate : 0.8 * smoothed + 0.2 * rate);
  }
  last_batch_at_ = now;
  bool full;
  {
    MutexLock lock(&mu_);
    full = local_samples_.load() + PredictedOthers(now) >= options_.target_batch_size;
  }
  // A peer that joined has no idea of the group's round: it takes part in the next one at once.
  if (!full && !(options_.fault_tolerant && comm_->state_stale())) return false;

  // The round is full as far as this peer knows: publish the final count at once (peers still
  // training learn it sooner, and that this peer adds no more), then average.
  round_closed_.store(true);
  ThrowIfError(Publish({round(), local_samples_.load(), samples_per_s_.load(), true, absl::Now()}));
  bool stepped = true;
  if (options_.fault_tolerant) {
    stepped = AverageRound();
    if (!stepped) round_closed_.store(false);  // Given up: the samples stay, the round goes on.
  } else {
    if (options_.delay_updates && in_flight_.has_value()) ApplyInFlight();
    StartAveraging();
    if (!options_.delay_updates) ApplyInFlight();
  }
  last_batch_at_ = absl::Now();
  return stepped;
}

bool CollaborativeOptimizer::AverageRound() {
  const int64_t local = local_samples_.load();
  // The weighted average of the peers' mean gradients is the group's gradient per sample.
  at::Tensor mean = accumulated_ / static_cast<double>(local);
  absl::StatusOr<AverageOutcome> outcome =
      averager_.AverageRound(mean, static_cast<double>(local),
                             options_.fault_tolerant ? state_.tensors() : NamedTensors{});
  if (!outcome.ok()) {
    // Given up on every survivor alike: the samples stay in the round, which is tried again.
    if (IsMembershipChanged(outcome.status())) return false;
    ThrowIfError(outcome.status());
  }
  SetOptimizerSteps(optimizer_, state_.step());  // Adam's count: the group's, a joiner's too.
  StepWith(mean);
  state_.CountStep();
  accumulated_.zero_();
  last_round_samples_ = static_cast<int64_t>(outcome->total_weight);
  last_round_local_samples_ = local;
  last_round_peers_ = static_cast<int>(outcome->contributors.size());
  BeginRound(state_.step());
  return true;
}

void CollaborativeOptimizer::StartAveraging() {
  Round round;
  round.local_samples = local_samples_.load();
  round.samples = at::full({1}, static_cast<double>(round.local_samples), at::kDouble);
  round.sum = accumulated_.clone();
  accumulated_.zero_();
  absl::StatusOr<Buffer> samples = BufferOf(round.samples);
  ThrowIfError(samples.status());
  // The counts travel exactly (codecs never apply to f64); the weighted sums with the averaging
  // options.
  round.samples_done = FutureOf(comm_->AllReduce(*samples, *samples, ReduceOp::kSum),
                                {round.samples}, nullptr, nullptr);
  round.sum_done = averager_.Start(round.sum, 0, ReduceOp::kSum);
  in_flight_ = std::move(round);
  BeginRound(this->round() + 1);
}

void CollaborativeOptimizer::BeginRound(int64_t round) {
  MutexLock lock(&mu_);
  local_samples_.store(0);  // Counts start again from zero.
  round_closed_.store(false);
  round_ = round;
  round_began_ = absl::Now();
}

void CollaborativeOptimizer::StepWith(const at::Tensor& average) {
  int64_t offset = 0;
  for (at::Tensor& p : parameters_) {
    at::Tensor part = average.narrow(0, offset, p.numel()).view_as(p);
    if (p.mutable_grad().defined()) {
      p.mutable_grad().copy_(part);
    } else {
      p.mutable_grad() = part.clone();
    }
    offset += p.numel();
  }
  ScaleLearningRates();
  optimizer_.step();
  for (at::Tensor& p : parameters_) p.mutable_grad().zero_();
  ++steps_;
}

void CollaborativeOptimizer::ApplyInFlight() {
  Round round = std::move(*in_flight_);
  in_flight_.reset();
  for (auto* future : {&round.samples_done, &round.sum_done}) {
    (*future)->wait();
    if ((*future)->hasError()) std::rethrow_exception((*future)->exception_ptr());
  }
  const double total = round.samples.item<double>();
  TORCH_CHECK(total > 0, "hmc: a round with no samples");
  round.sum.div_(total);
  StepWith(round.sum);
  last_round_samples_ = static_cast<int64_t>(total);
  last_round_local_samples_ = round.local_samples;
}

void CollaborativeOptimizer::Finish() {
  if (in_flight_.has_value()) ApplyInFlight();
}

}  // namespace hmc::ddp
