#include "ddp/diloco.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <string>

#include "ddp/tensor_interop.h"

namespace hmc::ddp {

DiLoCo::DiLoCo(std::shared_ptr<Communicator> comm, std::vector<at::Tensor> parameters,
               DiLoCoOptions options)
    : comm_(std::move(comm)),
      parameters_(Trainable(parameters)),
      options_(std::move(options)),
      averager_(comm_, options_.averaging),
      state_({}) {
  TORCH_CHECK(options_.inner_steps >= 1, "hmc DiLoCo: inner_steps must be at least 1");
  TORCH_CHECK(options_.fragments >= 1 && options_.fragments <= options_.inner_steps,
              "hmc DiLoCo: fragments must be between 1 and inner_steps");
  TORCH_CHECK(options_.outer_lr > 0 && options_.outer_momentum >= 0 && options_.outer_momentum < 1,
              "hmc DiLoCo: outer_lr must be positive and outer_momentum in [0, 1)");
  TORCH_CHECK(!parameters_.empty(), "hmc DiLoCo: no trainable parameters");
  const at::ScalarType type = parameters_.front().scalar_type();
  for (const at::Tensor& p : parameters_) {
    TORCH_CHECK(p.scalar_type() == type && (type == at::kFloat || type == at::kDouble),
                "hmc DiLoCo: parameters must be float or double, all of one type");
    TORCH_CHECK(p.is_contiguous() && p.device().is_cpu(),
                "hmc DiLoCo: parameters must be dense CPU tensors");
  }
  const bool joined = comm_->joined_running_group();
  TORCH_CHECK(!joined || options_.fault_tolerant,
              "hmc DiLoCo: this rank joined a running group, which only fault-tolerant DiLoCo can "
              "take (DiLoCoOptions::fault_tolerant)");
  TORCH_CHECK(!options_.fault_tolerant || options_.fragments == 1,
              "hmc DiLoCo: fault-tolerant syncs take every parameter at once (fragments 1)");
  // A joiner takes the members' outer parameters in its first sync instead.
  if (options_.broadcast_parameters && !joined) BroadcastFromRankZero(*comm_, parameters_);
  outer_ = Flatten();
  momentum_ = at::zeros_like(outer_);
  delta_ = at::zeros_like(outer_);
  state_.Share({{"diloco.outer", outer_}, {"diloco.momentum", momentum_}});
  const int64_t total = outer_.numel();
  const int n = options_.fragments;
  for (int f = 0; f < n; ++f) {
    Fragment fragment;
    fragment.begin = total * f / n;
    fragment.numel = total * (f + 1) / n - fragment.begin;
    fragment.offset = options_.inner_steps * f / n;
    fragments_.push_back(std::move(fragment));
  }
}

DiLoCo::~DiLoCo() {
  // Averaging still in flight refers to delta_: let it end (its outcome no longer matters).
  for (Fragment& f : fragments_) {
    if (f.averaging != nullptr) f.averaging->wait();
  }
}

at::Tensor DiLoCo::Flatten(int64_t begin, int64_t numel) const {
  // Only the parameters that overlap the range: a fragment's step copies its own share.
  const int64_t end = begin + numel;
  std::vector<at::Tensor> parts;
  int64_t offset = 0;
  for (const at::Tensor& p : parameters_) {
    const int64_t from = std::max(begin, offset), to = std::min(end, offset + p.numel());
    if (from < to) parts.push_back(p.detach().view({-1}).narrow(0, from - offset, to - from));
    offset += p.numel();
  }
  return at::cat(parts);
}

at::Tensor DiLoCo::Flatten() const {
  int64_t total = 0;
  for (const at::Tensor& p : parameters_) total += p.numel();
  return Flatten(0, total);
}

void DiLoCo::WriteParameters(int64_t begin, const at::Tensor& values) {
  const int64_t end = begin + values.numel();
  int64_t offset = 0;
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : parameters_) {
    const int64_t from = std::max(begin, offset), to = std::min(end, offset + p.numel());
    if (from < to) {
      p.detach()
          .view({-1})
          .narrow(0, from - offset, to - from)
          .copy_(values.narrow(0, from - begin, to - from));
    }
    offset += p.numel();
  }
}

void DiLoCo::OuterStep(int64_t begin, int64_t numel) {
  // SGD with Nesterov momentum, as torch.optim.SGD(nesterov=True): v = μv + g; θ -= lr(g + μv).
  const at::Tensor g = delta_.narrow(0, begin, numel);
  at::Tensor v = momentum_.narrow(0, begin, numel);
  v.mul_(options_.outer_momentum).add_(g);
  outer_.narrow(0, begin, numel).sub_(g.add(v, options_.outer_momentum), options_.outer_lr);
}

bool DiLoCo::AfterInnerStep(double samples) {
  ++inner_step_;
  samples_since_sync_ += samples;
  bool synced = false;
  if (fragments_.size() == 1) {
    if (inner_step_ % options_.inner_steps != 0) return false;
    if (options_.fault_tolerant) {
      // A skipped sync's samples stay in the next one's weight, as its progress does.
      if (!SyncFaultTolerant(samples_since_sync_)) return false;
    } else {
      SyncBlocking();
    }
    samples_since_sync_ = 0;
    return true;
  }
  // Streaming: a fragment whose averaging has completed is applied now, whichever step that is
  // on this rank (the outer values depend only on the averages, so ranks agree on them; only the
  // local parameters, which differ between ranks anyway, see the timing). A fragment due to
  // start again waits for its last averaging first. Starts happen at the same steps everywhere,
  // so every rank issues the same collectives in the same order.
  for (size_t f = 0; f < fragments_.size(); ++f) {
    Fragment& fragment = fragments_[f];
    const bool due = (inner_step_ + fragment.offset) % options_.inner_steps == 0;
    if (fragment.averaging != nullptr && (due || fragment.averaging->completed())) {
      ApplyFragment(f);
      synced = true;
    }
    if (due) StartFragment(f);
  }
  return synced;
}

void DiLoCo::SyncBlocking() {
  at::NoGradGuard no_grad;
  at::sub_out(delta_, outer_, Flatten());
  c10::intrusive_ptr<c10::ivalue::Future> done = averager_.Start(delta_, 0, ReduceOp::kAvg);
  done->wait();
  if (done->hasError()) TORCH_CHECK(false, "hmc DiLoCo sync: ", done->tryRetrieveErrorMessage());
  OuterStep(0, outer_.numel());
  WriteParameters(0, outer_);
  ++outer_steps_;
}

bool DiLoCo::SyncFaultTolerant(double samples) {
  at::NoGradGuard no_grad;
  at::sub_out(delta_, outer_, Flatten());
  absl::StatusOr<AverageOutcome> outcome =
      averager_.AverageRound(delta_, samples, state_.tensors());
  if (!outcome.ok()) {
    // Every survivor fails alike: all keep their local progress, and the outer parameters of
    // the last sync, so the next sync's pseudo-gradient covers both periods.
    TORCH_CHECK(IsMembershipChanged(outcome.status()),
                "hmc DiLoCo sync: ", std::string(outcome.status().message()));
    ++skipped_;
    return false;
  }
  last_sync_ = *std::move(outcome);
  // A joiner's outer parameters and momentum are the members' now; its own pseudo-gradient
  // counted for nothing. Every rank takes the same step from the same values.
  OuterStep(0, outer_.numel());
  WriteParameters(0, outer_);
  state_.CountStep();
  return true;
}

void DiLoCo::StartFragment(size_t f) {
  Fragment& fragment = fragments_[f];
  at::NoGradGuard no_grad;
  const at::Tensor local = Flatten(fragment.begin, fragment.numel);
  fragment.local_at_start = local;  // at::cat made it a copy.
  at::Tensor delta = delta_.narrow(0, fragment.begin, fragment.numel);
  at::sub_out(delta, outer_.narrow(0, fragment.begin, fragment.numel), local);
  // Each fragment is its own bucket: its own error-feedback residual.
  fragment.averaging = averager_.Start(delta, f, ReduceOp::kAvg);
}

void DiLoCo::ApplyFragment(size_t f) {
  Fragment& fragment = fragments_[f];
  c10::intrusive_ptr<c10::ivalue::Future> done = std::move(fragment.averaging);
  fragment.averaging.reset();
  done->wait();
  if (done->hasError()) {
    TORCH_CHECK(false, "hmc DiLoCo sync of fragment ", f, ": ", done->tryRetrieveErrorMessage());
  }
  at::NoGradGuard no_grad;
  OuterStep(fragment.begin, fragment.numel);
  // The local steps taken while it was averaged are kept on top of the new outer values.
  const at::Tensor local = Flatten(fragment.begin, fragment.numel);
  WriteParameters(fragment.begin, outer_.narrow(0, fragment.begin, fragment.numel) + local -
                                      fragment.local_at_start);
  fragment.local_at_start = at::Tensor();
  ++outer_steps_;
}

void DiLoCo::WithOuterParameters(const std::function<void()>& body) {
  const at::Tensor local = Flatten();
  WriteParameters(0, outer_);
  try {
    body();
  } catch (...) {
    WriteParameters(0, local);
    throw;
  }
  WriteParameters(0, local);
}

void DiLoCo::Finish() {
  for (size_t f = 0; f < fragments_.size(); ++f) {
    if (fragments_[f].averaging != nullptr) ApplyFragment(f);
  }
}

void DiLoCo::Save(torch::serialize::OutputArchive& archive) const {
  archive.write("outer", outer_);
  archive.write("momentum", momentum_);
  archive.write("steps", at::tensor({inner_step_, outer_steps()}, at::kLong));
}

void DiLoCo::Restore(torch::serialize::InputArchive* archive) {
  TORCH_CHECK(inner_step_ == 0, "hmc DiLoCo: Restore comes before the first inner step");
  // Rank 0's verdict travels first, so that no rank waits for state that will not come:
  // {1: restored, 0: afresh, -1: refused; inner steps; outer steps}.
  at::Tensor verdict = at::tensor({int64_t{0}, int64_t{0}, int64_t{0}}, at::kLong);
  std::string refusal;
  if (comm_->rank() == 0 && archive != nullptr) {
    at::Tensor outer, momentum, steps;
    try {
      archive->read("outer", outer);
      archive->read("momentum", momentum);
      archive->read("steps", steps);
    } catch (const c10::Error& e) {
      refusal = e.what_without_backtrace();
    }
    if (refusal.empty() &&
        (outer.numel() != outer_.numel() || !outer.sizes().equals(momentum.sizes()) ||
         outer.scalar_type() != outer_.scalar_type() || steps.numel() != 2)) {
      refusal = c10::str("it holds ", outer.numel(), " outer parameters of ", outer.scalar_type(),
                         ", the model ", outer_.numel(), " of ", outer_.scalar_type());
    }
    if (refusal.empty()) {
      outer_.copy_(outer.view({-1}));
      momentum_.copy_(momentum.view({-1}));
      verdict = at::cat({at::tensor({int64_t{1}}, at::kLong), steps.to(at::kLong).view({-1})});
    } else {
      verdict[0] = -1;
    }
  }
  BroadcastFromRankZero(*comm_, {verdict});
  const int64_t outcome = verdict[0].item<int64_t>();
  TORCH_CHECK(outcome >= 0, "hmc DiLoCo: rank 0's checkpoint does not fit this model",
              refusal.empty() ? std::string(" (see rank 0)") : ": " + refusal);
  if (outcome == 0) return;
  BroadcastFromRankZero(*comm_, {outer_, momentum_});
  inner_step_ = verdict[1].item<int64_t>();
  if (options_.fault_tolerant) {
    state_.set_step(verdict[2].item<int64_t>());
  } else {
    outer_steps_ = verdict[2].item<int64_t>();
  }
  WriteParameters(0, outer_);
}

int64_t DiLoCo::outer_steps() const {
  return options_.fault_tolerant ? state_.step() : outer_steps_;
}

}  // namespace hmc::ddp
