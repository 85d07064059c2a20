#include "ddp/fault_tolerant_hook.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <string>

namespace hmc::ddp {

FaultTolerantCommHook::FaultTolerantCommHook(std::shared_ptr<Communicator> comm,
                                             std::vector<at::Tensor> parameters,
                                             AveragingOptions options)
    : averager_(std::move(comm), std::move(options)), state_(parameters) {
  for (const at::Tensor& p : parameters) {
    TORCH_CHECK(p.scalar_type() == parameters.front().scalar_type() &&
                    (p.scalar_type() == at::kFloat || p.scalar_type() == at::kDouble),
                "hmc: fault-tolerant averaging needs parameters all float or all double");
  }
}

c10::intrusive_ptr<c10::ivalue::Future> FaultTolerantCommHook::runHook(c10d::GradBucket& bucket) {
  auto future =
      c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  // Buckets come in index order; a new step's first one drops what a failed step left.
  if (bucket.getIndex() == 0) pending_.clear();
  pending_.push_back({bucket.getBufferRef(), future});
  if (bucket.isLast()) AverageStep();
  return future;
}

at::Tensor FaultTolerantCommHook::parseHookResult(const c10::IValue& result) {
  return result.toTensorVector()[0];
}

void FaultTolerantCommHook::AverageStep() {
  std::vector<at::Tensor> flats;
  for (const Pending& p : pending_) flats.push_back(p.flat);
  // Into the same memory every step: no allocation of the model's size per step.
  if (!all_.defined()) all_ = at::empty({0}, flats.front().options());
  at::cat_out(all_, flats);
  absl::StatusOr<AverageOutcome> outcome = averager_.AverageRound(all_, samples_, state_.tensors());
  if (!outcome.ok()) {
    // The buckets keep this rank's own gradients; loss.backward() throws on every survivor.
    const std::string message =
        std::string("hmc fault-tolerant hook: ") + std::string(outcome.status().message());
    for (Pending& p : pending_)
      p.future->setError(std::make_exception_ptr(c10::Error(message, "")));
    pending_.clear();
    return;
  }
  last_step_ = *std::move(outcome);
  state_.CountStep();
  int64_t offset = 0;
  for (Pending& p : pending_) {
    p.flat.copy_(all_.narrow(0, offset, p.flat.numel()));
    offset += p.flat.numel();
    p.future->markCompleted(c10::IValue(std::vector<at::Tensor>{p.flat}));
  }
  pending_.clear();
}

}  // namespace hmc::ddp
