#include "ddp/distributed_data_parallel.h"

#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <string>

#include "ddp/tensor_interop.h"

namespace hmc::ddp {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Communicator> comm,
                                                 std::vector<at::Tensor> parameters,
                                                 DdpOptions options)
    : parameters_(Trainable(parameters)),
      averager_(comm, options.averaging),
      options_(options),
      state_(parameters_) {
  const bool joined = comm->joined_running_group();
  TORCH_CHECK(!joined || options.fault_tolerant,
              "hmc DDP: this rank joined a running group, which only fault-tolerant DDP can take "
              "(DdpOptions::fault_tolerant)");
  // A joiner gets the members' parameters with their state instead.
  if (options.broadcast_parameters && !joined) BroadcastFromRankZero(*comm, parameters_);
  MutexLock lock(&mu_);
  slots_.resize(parameters_.size());
  size_t bucket_bytes = 0;
  for (size_t i = parameters_.size(); i-- > 0;) {
    const at::Tensor& p = parameters_[i];
    const bool dtype_changes =
        !buckets_.empty() &&
        parameters_[buckets_.back().parameters[0]].scalar_type() != p.scalar_type();
    if (buckets_.empty() || bucket_bytes >= options.bucket_bytes || dtype_changes) {
      buckets_.emplace_back();
      bucket_bytes = 0;
    }
    Bucket& b = buckets_.back();
    slots_[i] = {buckets_.size() - 1, 0};
    b.parameters.push_back(i);
    bucket_bytes += p.numel() * p.element_size();
  }
  for (Bucket& b : buckets_) {
    int64_t numel = 0;
    for (size_t i : b.parameters) {
      slots_[i].offset = numel;
      numel += parameters_[i].numel();
    }
    b.flat = at::zeros({numel}, parameters_[b.parameters[0]].options().requires_grad(false));
    b.pending = b.parameters.size();
  }
  for (const Bucket& b : buckets_) {
    const at::ScalarType type = b.flat.scalar_type();
    TORCH_CHECK(!options.fault_tolerant || type == at::kFloat || type == at::kDouble,
                "hmc DDP: fault-tolerant averaging needs float or double parameters");
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    hooks_.push_back(
        parameters_[i].register_hook([this, i](const at::Tensor& grad) { OnGradient(i, grad); }));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].remove_hook(hooks_[i]);
}

void DistributedDataParallel::OnGradient(size_t parameter, const at::Tensor& grad) {
  MutexLock lock(&mu_);
  Slot& slot = slots_[parameter];
  if (slot.filled) return;  // A second backward before FinishBackward: the first one counts.
  Bucket& b = buckets_[slot.bucket];
  b.flat.narrow(0, slot.offset, grad.numel()).copy_(grad.reshape({-1}));
  slot.filled = true;
  --b.pending;
  StartReadyBuckets();
}

void DistributedDataParallel::StartReadyBuckets() {
  while (next_to_start_ < buckets_.size() && buckets_[next_to_start_].pending == 0) {
    Bucket& b = buckets_[next_to_start_];
    if (options_.fault_tolerant) {
      AddToRound(next_to_start_);
    } else {
      b.future = averager_.Start(b.flat, next_to_start_);
    }
    ++next_to_start_;
  }
}

void DistributedDataParallel::AddToRound(size_t bucket) {
  if (bucket == 0) round_ = averager_.BeginRound(samples_, state_.tensors());
  round_->Add(buckets_[bucket].flat, bucket + 1 == buckets_.size());
}

void DistributedDataParallel::set_samples(double samples) {
  MutexLock lock(&mu_);
  samples_ = samples;
}

void DistributedDataParallel::ShareState(std::vector<std::pair<std::string, at::Tensor>> tensors) {
  state_.Share(std::move(tensors));
}

bool DistributedDataParallel::state_stale() const {
  return averager_.shared_communicator()->state_stale();
}

void DistributedDataParallel::FinishStep() {
  absl::StatusOr<AverageOutcome> outcome = round_->Finish();
  round_.reset();
  if (!outcome.ok()) {
    // The buckets hold this rank's own gradients, as the caller computed them.
    TORCH_CHECK(false, "hmc DDP step: ", std::string(outcome.status().message()));
  }
  last_step_ = *std::move(outcome);
  state_.CountStep();
}

void DistributedDataParallel::FinishBackward() {
  MutexLock lock(&mu_);
  // Parameters that got no gradient this step contribute zeros.
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Slot& slot = slots_[i];
    if (slot.filled) continue;
    buckets_[slot.bucket].flat.narrow(0, slot.offset, parameters_[i].numel()).zero_();
    slot.filled = true;
    --buckets_[slot.bucket].pending;
  }
  StartReadyBuckets();
  std::exception_ptr failure;
  if (options_.fault_tolerant && !buckets_.empty()) {
    try {
      FinishStep();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  for (Bucket& b : buckets_) {
    if (b.future == nullptr) continue;
    b.future->wait();
    if (b.future->hasError() && failure == nullptr) failure = b.future->exception_ptr();
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Slot& slot = slots_[i];
    at::Tensor& p = parameters_[i];
    at::Tensor average = buckets_[slot.bucket].flat.narrow(0, slot.offset, p.numel()).view_as(p);
    if (p.mutable_grad().defined()) {
      p.mutable_grad().copy_(average);
    } else {
      p.mutable_grad() = average.clone();
    }
    slot.filled = false;
  }
  for (Bucket& b : buckets_) {
    b.pending = b.parameters.size();
    b.future.reset();
  }
  next_to_start_ = 0;
  if (failure != nullptr) std::rethrow_exception(failure);
}

}  // namespace hmc::ddp
