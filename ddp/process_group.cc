#include "ddp/process_group.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_format.h"
#include "ddp/tensor_interop.h"
#include "ddp/work_future.h"

namespace hmc::ddp {
namespace {

// A c10d Work over an hmc collective: its state is its future's.
class WorkHmc : public c10d::Work {
 public:
  WorkHmc(int rank, c10d::OpType type, c10::intrusive_ptr<c10::ivalue::Future> future)
      : c10d::Work(rank, type), future_(std::move(future)) {}

  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    return future_->hasError() ? future_->exception_ptr() : nullptr;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    // hmc's own deadline (the call's timeout) bounds every collective; a shorter wait is honoured
    // by polling the future.
    if (timeout.count() > 0) {  // 0 (kNoTimeout): no limit.
      const auto until = std::chrono::steady_clock::now() + timeout;
      while (!future_->completed()) {
        TORCH_CHECK(std::chrono::steady_clock::now() < until, "hmc: wait timed out after ",
                    timeout.count(), " ms");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return future_->value().toTensorVector(); }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

Buffer Checked(const at::Tensor& tensor) {
  absl::StatusOr<Buffer> buffer = BufferOf(tensor);
  ThrowIfError(buffer.status());
  return *buffer;
}

const at::Tensor& Single(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "hmc: ", what, " takes one tensor per process, got ",
              tensors.size());
  return tensors[0];
}

}  // namespace

ProcessGroupHmc::ProcessGroupHmc(std::shared_ptr<Communicator> comm, CallOptions call)
    : c10d::ProcessGroup(comm->rank(), comm->size()), comm_(std::move(comm)), call_(call) {}

CallOptions ProcessGroupHmc::CallWith(std::chrono::milliseconds timeout) const {
  CallOptions call = call_;
  if (timeout.count() > 0) call.timeout = absl::FromChrono(timeout);
  return call;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::Wrap(c10d::OpType type, std::shared_ptr<Work> work,
                                                     std::vector<at::Tensor> outputs,
                                                     std::function<void()> finish) {
  return c10::make_intrusive<WorkHmc>(
      getRank(), type, FutureOf(std::move(work), std::move(outputs), std::move(finish), meter_));
}
c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = Single(tensors, "broadcast");
  const Buffer b = Checked(t);
  return Wrap(c10d::OpType::BROADCAST,
              comm_->Broadcast(b, b, static_cast<int>(opts.rootRank), CallWith(opts.timeout)),
              tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  const Buffer b = Checked(Single(tensors, "allreduce"));
  absl::StatusOr<ReduceOp> op = ReduceOpOf(opts.reduceOp);
  ThrowIfError(op.status());
  return Wrap(c10d::OpType::ALLREDUCE, comm_->AllReduce(b, b, *op, CallWith(opts.timeout)),
              tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "hmc: allreduce_coalesced of no tensors");
  std::vector<at::Tensor> flat_views;
  for (const at::Tensor& t : tensors) flat_views.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flat_views);
  const Buffer b = Checked(flat);
  absl::StatusOr<ReduceOp> op = ReduceOpOf(opts.reduceOp);
  ThrowIfError(op.status());
  auto unflatten = [flat, tensors]() mutable {
    int64_t offset = 0;
    for (at::Tensor& t : tensors) {
      t.copy_(flat.narrow(0, offset, t.numel()).view_as(t));
      offset += t.numel();
    }
  };
  return Wrap(c10d::OpType::ALLREDUCE, comm_->AllReduce(b, b, *op, CallWith(opts.timeout)), tensors,
              unflatten);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = Single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "hmc: allgather needs one list of ", getSize(), " output tensors");
  at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
  std::vector<at::Tensor> out = outputs[0];
  auto scatter = [flat, out]() mutable {
    for (size_t r = 0; r < out.size(); ++r) {
      out[r].copy_(flat.narrow(0, r * out[r].numel(), out[r].numel()).view_as(out[r]));
    }
  };
  return Wrap(c10d::OpType::ALLGATHER,
              comm_->AllGather(Checked(in), Checked(flat), CallWith(opts.timeout)), out, scatter);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  return Wrap(c10d::OpType::_ALLGATHER_BASE,
              comm_->AllGather(Checked(input), Checked(output), CallWith(opts.timeout)), {output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = Single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "hmc: reduce_scatter needs one list of ", getSize(), " input tensors");
  std::vector<at::Tensor> flat_inputs;
  for (const at::Tensor& t : inputs[0]) flat_inputs.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flat_inputs);
  absl::StatusOr<ReduceOp> op = ReduceOpOf(opts.reduceOp);
  ThrowIfError(op.status());
  // `flat` lives until the collective ends: the finish step holds it.
  return Wrap(c10d::OpType::REDUCE_SCATTER,
              comm_->ReduceScatter(Checked(flat), Checked(out), *op, CallWith(opts.timeout)),
              outputs, [flat]() {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::barrier(const c10d::BarrierOptions& opts) {
  return Wrap(c10d::OpType::BARRIER, comm_->Barrier(CallWith(opts.timeout)), {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                     int /*tag*/) {
  return Wrap(c10d::OpType::SEND, comm_->Send(Checked(Single(tensors, "send")), dst_rank), tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHmc::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                     int /*tag*/) {
  return Wrap(c10d::OpType::RECV, comm_->Recv(Checked(Single(tensors, "recv")), src_rank), tensors);
}

}  // namespace hmc::ddp
