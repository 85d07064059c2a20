#include "ddp/gradient_averager.h"

#include <ATen/core/Tensor.h>

#include "ddp/tensor_interop.h"
#include "ddp/work_future.h"

namespace hmc::ddp {

GradientAverager::GradientAverager(std::shared_ptr<Communicator> comm, AveragingOptions options)
    : comm_(std::move(comm)), options_(std::move(options)) {}

c10::intrusive_ptr<c10::ivalue::Future> GradientAverager::Start(const at::Tensor& flat,
                                                                size_t bucket, ReduceOp op) {
  absl::StatusOr<Buffer> buffer = BufferOf(flat);
  ThrowIfError(buffer.status());
  CallOptions call{.codec_inter = options_.codec_inter, .codec_intra = options_.codec_intra};
  if (options_.error_feedback) {
    MutexLock lock(&mu_);
    call.feedback = &feedback_[bucket];
  }
  return FutureOf(comm_->AllReduce(*buffer, *buffer, op, call), {flat}, nullptr, meter_);
}

absl::StatusOr<AverageOutcome> GradientAverager::AverageRound(
    const at::Tensor& flat, double weight,
    const std::vector<std::pair<std::string, at::Tensor>>& state) {
  SharedState shared;
  for (const auto& [name, tensor] : state) {
    absl::StatusOr<Buffer> buffer = BufferOf(tensor);
    if (!buffer.ok()) return buffer.status();
    shared.tensors.emplace_back(name, *buffer);
  }
  const Buffer buffer{flat.data_ptr(), static_cast<size_t>(flat.numel()),
                      flat.scalar_type() == at::kFloat ? DType::kF32 : DType::kF64};
  CallOptions call;
  call.codec_inter = options_.codec_inter;
  call.codec_intra = options_.codec_intra;
  absl::StatusOr<AverageOutcome> outcome =
      comm_->Average(buffer, weight, call, state.empty() ? nullptr : &shared);
  if (outcome.ok()) meter_->Add(outcome->report);
  return outcome;
}

void BroadcastFromRankZero(Communicator& comm, const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    at::Tensor contiguous = t.detach().contiguous();
    absl::StatusOr<Buffer> buffer = BufferOf(contiguous);
    ThrowIfError(buffer.status());
    ThrowIfError(comm.Broadcast(*buffer, *buffer, 0)->Wait());
    if (!contiguous.is_same(t)) t.detach().copy_(contiguous);
  }
}

}  // namespace hmc::ddp
