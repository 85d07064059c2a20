#ifndef HMC_DDP_WORK_FUTURE_H_
#define HMC_DDP_WORK_FUTURE_H_

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <vector>

#include "collectives/work.h"
#include "ddp/traffic.h"

namespace hmc::ddp {

// A libtorch future (of a list of tensors) that completes when an hmc collective does: with
// `outputs` after `finish` ran (copying results out of staging buffers; may be empty), or with a
// c10::Error carrying hmc's message. `meter` (may be null) receives the collective's report.
// Holds `outputs` and whatever `finish` captures until then.
c10::intrusive_ptr<c10::ivalue::Future> FutureOf(std::shared_ptr<Work> work,
                                                 std::vector<at::Tensor> outputs,
                                                 std::function<void()> finish,
                                                 std::shared_ptr<TrafficMeter> meter);

}  // namespace hmc::ddp

#endif  // HMC_DDP_WORK_FUTURE_H_
