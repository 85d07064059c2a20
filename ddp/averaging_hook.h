#ifndef HMC_DDP_AVERAGING_HOOK_H_
#define HMC_DDP_AVERAGING_HOOK_H_

#include <memory>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include "ddp/gradient_averager.h"

namespace hmc::ddp {

// The drop-in DDP communication hook: each gradient bucket that libtorch's c10d::Reducer hands
// over is averaged through hmc (codec per link class, error feedback kept per bucket), and the
// future completes with the averaged bucket. Register it with
//   reducer.register_comm_hook(std::make_unique<hmc::ddp::AveragingCommHook>(comm, options));
// (libtorch 1.13's CppCommHookInterface<T> does not link from the Debian package, so this
// derives from CommHookInterface.)
class AveragingCommHook : public c10d::CommHookInterface {
 public:
  AveragingCommHook(std::shared_ptr<Communicator> comm, AveragingOptions options = {});

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override;

  Traffic traffic() const { return averager_.traffic(); }

 private:
  GradientAverager averager_;
};

}  // namespace hmc::ddp

#endif  // HMC_DDP_AVERAGING_HOOK_H_
