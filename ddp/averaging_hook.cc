#include "ddp/averaging_hook.h"

namespace hmc::ddp {

AveragingCommHook::AveragingCommHook(std::shared_ptr<Communicator> comm, AveragingOptions options)
    : averager_(std::move(comm), std::move(options)) {}

c10::intrusive_ptr<c10::ivalue::Future> AveragingCommHook::runHook(c10d::GradBucket& bucket) {
  return averager_.Start(bucket.getBufferRef(), bucket.getIndex());
}

at::Tensor AveragingCommHook::parseHookResult(const c10::IValue& result) {
  return result.toTensorVector()[0];
}

}  // namespace hmc::ddp
