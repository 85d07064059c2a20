#include "ddp/fault_tolerant_hook.h"

#include <c10/util/Exception.h>

#include <string>

namespace hmc::ddp {

FaultTolerantCommHook::FaultTolerantCommHook(std::shared_ptr<Communicator> comm,
                                             std::vector<at::Tensor> parameters,
                                             AveragingOptions options)
    : averager_(std::move(comm), std::move(options)), state_(parameters) {
  for (const at::Tensor& p : parameters) {
    TORCH_CHECK(p.scalar_type() == at::kFloat || p.scalar_type() == at::kDouble,
                "hmc: fault-tolerant averaging needs float or double parameters");
  }
}

c10::intrusive_ptr<c10::ivalue::Future> FaultTolerantCommHook::runHook(c10d::GradBucket& bucket) {
  auto future =
      c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  // Buckets come in index order; a new step's first one drops what a failed step left.
  if (bucket.getIndex() == 0) {
    round_.reset();
    pending_.clear();
    round_ = averager_.BeginRound(samples_, state_.tensors());
  }
  pending_.emplace_back(bucket.getBufferRef(), future);
  round_->Add(bucket.getBufferRef(), bucket.isLast());
  if (bucket.isLast()) FinishStep();
  return future;
}

at::Tensor FaultTolerantCommHook::parseHookResult(const c10::IValue& result) {
  return result.toTensorVector()[0];
}

void FaultTolerantCommHook::FinishStep() {
  absl::StatusOr<AverageOutcome> outcome = round_->Finish();
  round_.reset();
  if (!outcome.ok()) {
    FailStep(outcome.status());
    return;
  }
  last_step_ = *std::move(outcome);
  state_.CountStep();
  // Each bucket holds its average now.
  for (auto& [flat, future] : pending_) {
    future->markCompleted(c10::IValue(std::vector<at::Tensor>{flat}));
  }
  pending_.clear();
}

void FaultTolerantCommHook::FailStep(const absl::Status& status) {
  // The buckets keep this rank's own gradients; loss.backward() throws on every survivor.
  const std::string message =
      std::string("hmc fault-tolerant hook: ") + std::string(status.message());
  for (auto& [flat, future] : pending_) {
    future->setError(std::make_exception_ptr(c10::Error(message, "")));
  }
  pending_.clear();
}

}  // namespace hmc::ddp
