#include "ddp/work_future.h"

#include <c10/util/Exception.h>

#include <string>

namespace hmc::ddp {

c10::intrusive_ptr<c10::ivalue::Future> FutureOf(std::shared_ptr<Work> work,
                                                 std::vector<at::Tensor> outputs,
                                                 std::function<void()> finish,
                                                 std::shared_ptr<TrafficMeter> meter) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  Work* raw = work.get();
  // The future's waiters cannot run the collective on their thread: a worker runs it now.
  raw->StartWithoutWaiter();
  raw->OnDone([future, work = std::move(work), outputs = std::move(outputs),
               finish = std::move(finish), meter = std::move(meter)](const absl::Status& status) {
    if (meter != nullptr) meter->Add(work->report());
    if (!status.ok()) {
      future->setError(
          std::make_exception_ptr(c10::Error("hmc: " + std::string(status.message()), "")));
      return;
    }
    try {
      if (finish) finish();
      future->markCompleted(c10::IValue(outputs));
    } catch (const std::exception& e) {
      future->setError(std::current_exception());
    }
  });
  return future;
}

}  // namespace hmc::ddp
