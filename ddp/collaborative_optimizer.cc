#include "ddp/collaborative_optimizer.h"

#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/optim/optimizer.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
  ThrowIfError(comm_->PutKey(ProgressKey(0, comm_->id()), "0"));
  progress_ = std::thread([this] { TrackProgress(); });
}

CollaborativeOptimizer::~CollaborativeOptimizer() {
  stop_.Notify();
  progress_.join();
}

std::string CollaborativeOptimizer::ProgressKey(int64_t round, int id) const {
  return absl::StrCat("collab/", options_.run, "/", round, "/", id);
}

// Publishes this peer's count when it changes and reads the others'; a peer that has not begun
// the round yet counts as 0 until it does.
int64_t CollaborativeOptimizer::round() const {
  MutexLock lock(&mu_);
  return round_;
}

void CollaborativeOptimizer::TrackProgress() {
  int64_t published_round = 0;
  int64_t published = 0;
  while (!stop_.WaitForNotificationWithTimeout(options_.progress_interval)) {
    const int64_t round = this->round();
    const int64_t mine = local_samples_.load();
    if (round != published_round || mine != published) {
      if (!comm_->PutKey(ProgressKey(round, comm_->id()), absl::StrCat(mine)).ok()) return;
      published_round = round;
      published = mine;
    }
    // Every other member's count in one round trip to the coordinator (a peer that left the
    // group no longer counts).
    std::vector<std::string> keys;
    for (const PeerEntry& member : comm_->peers().peers) {
      if (member.rank != comm_->id()) keys.push_back(ProgressKey(round, member.rank));
    }
    int64_t others = 0;
    for (const absl::StatusOr<std::string>& value :
         comm_->GetKeys(keys, absl::Now() + options_.progress_interval)) {
      int64_t count;
      if (value.ok() && absl::SimpleAtoi(*value, &count)) others += count;
    }
    MutexLock lock(&mu_);
    if (round_ == round) others_samples_ = others;
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
  bool full;
  {
    MutexLock lock(&mu_);
    full = local_samples_.load() + others_samples_ >= options_.target_batch_size;
  }
  // A peer that joined has no idea of the group's round: it takes part in the next one at once.
  if (!full && !(options_.fault_tolerant && comm_->state_stale())) return false;

  // The round is full as far as this peer knows: publish the final count at once (peers still
  // training learn it sooner), then average.
  ThrowIfError(
      comm_->PutKey(ProgressKey(round(), comm_->id()), absl::StrCat(local_samples_.load())));
  if (options_.fault_tolerant) return AverageRound();
  if (options_.delay_updates && in_flight_.has_value()) ApplyInFlight();
  StartAveraging();
  if (!options_.delay_updates) ApplyInFlight();
  return true;
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
  int64_t offset = 0;
  for (at::Tensor& p : parameters_) {
    at::Tensor average = mean.narrow(0, offset, p.numel()).view_as(p);
    if (p.mutable_grad().defined()) {
      p.mutable_grad().copy_(average);
    } else {
      p.mutable_grad() = average.clone();
    }
    offset += p.numel();
  }
  SetOptimizerSteps(optimizer_, state_.step());  // Adam's count: the group's, a joiner's too.
  optimizer_.step();
  for (at::Tensor& p : parameters_) p.mutable_grad().zero_();
  state_.CountStep();
  accumulated_.zero_();
  ++steps_;
  last_round_samples_ = static_cast<int64_t>(outcome->total_weight);
  last_round_local_samples_ = local;
  last_round_peers_ = static_cast<int>(outcome->contributors.size());
  MutexLock lock(&mu_);
  others_samples_ = 0;
  local_samples_.store(0);
  round_ = state_.step();
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
  // The next round begins: counts start again from zero.
  MutexLock lock(&mu_);
  others_samples_ = 0;
  local_samples_.store(0);
  ++round_;
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
  int64_t offset = 0;
  for (at::Tensor& p : parameters_) {
    at::Tensor average = round.sum.narrow(0, offset, p.numel()).view_as(p);
    if (p.mutable_grad().defined()) {
      p.mutable_grad().copy_(average);
    } else {
      p.mutable_grad() = average.clone();
    }
    offset += p.numel();
  }
  optimizer_.step();
  for (at::Tensor& p : parameters_) p.mutable_grad().zero_();
  ++steps_;
  last_round_samples_ = static_cast<int64_t>(total);
  last_round_local_samples_ = round.local_samples;
}

void CollaborativeOptimizer::Finish() {
  if (in_flight_.has_value()) ApplyInFlight();
}

}  // namespace hmc::ddp
