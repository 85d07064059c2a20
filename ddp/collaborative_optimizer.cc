#include "ddp/collaborative_optimizer.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/optim/optimizer.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ddp/tensor_interop.h"
#include "ddp/work_future.h"

namespace hmc::ddp {

CollaborativeOptimizer::CollaborativeOptimizer(std::shared_ptr<Communicator> comm,
                                               std::vector<at::Tensor> parameters,
                                               torch::optim::Optimizer& optimizer,
                                               CollaborativeOptions options)
    : comm_(comm),
      optimizer_(optimizer),
      options_(std::move(options)),
      averager_(comm, options_.averaging) {
  TORCH_CHECK(options_.target_batch_size > 0, "hmc: target_batch_size must be positive");
  int64_t numel = 0;
  for (at::Tensor& p : parameters) {
    if (!p.requires_grad()) continue;
    TORCH_CHECK(p.scalar_type() == at::kFloat,
                "hmc: the collaborative optimizer takes f32 "
                "parameters");
    parameters_.push_back(p);
    numel += p.numel();
  }
  BroadcastFromRankZero(*comm_, parameters_);
  accumulated_ = at::zeros({numel}, at::kFloat);
  ThrowIfError(comm_->PutKey(ProgressKey(0, comm_->rank()), "0"));
  progress_ = std::thread([this] { TrackProgress(); });
}

CollaborativeOptimizer::~CollaborativeOptimizer() {
  stop_.Notify();
  progress_.join();
}

std::string CollaborativeOptimizer::ProgressKey(int64_t round, int rank) const {
  return absl::StrCat("collab/", options_.run, "/", round, "/", rank);
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
      if (!comm_->PutKey(ProgressKey(round, comm_->rank()), absl::StrCat(mine)).ok()) return;
      published_round = round;
      published = mine;
    }
    // Every peer's count in one round trip to the coordinator.
    std::vector<std::string> keys;
    for (int r = 0; r < comm_->size(); ++r) {
      if (r != comm_->rank()) keys.push_back(ProgressKey(round, r));
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
  {
    MutexLock lock(&mu_);
    if (local_samples_.load() + others_samples_ < options_.target_batch_size) return false;
  }

  // The round is full as far as this peer knows: publish the final count at once (peers still
  // training learn it sooner), then average.
  ThrowIfError(
      comm_->PutKey(ProgressKey(round(), comm_->rank()), absl::StrCat(local_samples_.load())));
  if (options_.delay_updates && in_flight_.has_value()) ApplyInFlight();
  StartAveraging();
  if (!options_.delay_updates) ApplyInFlight();
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
