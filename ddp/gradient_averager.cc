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

std::unique_ptr<GradientRound> GradientAverager::BeginRound(double weight,
                                                            const NamedTensors& state) {
  std::unique_ptr<GradientRound> round(new GradientRound());
  round->meter_ = meter_;
  for (const auto& [name, tensor] : state) {
    absl::StatusOr<Buffer> buffer = BufferOf(tensor);
    if (!buffer.ok()) {
      round->failure_ = buffer.status();
      return round;
    }
    round->state_.tensors.emplace_back(name, *buffer);
  }
  CallOptions call;
  call.codec_inter = options_.codec_inter;
  call.codec_intra = options_.codec_intra;
  absl::StatusOr<std::unique_ptr<hmc::AverageRound>> begun =
      comm_->BeginAverage(weight, call, state.empty() ? nullptr : &round->state_);
  if (begun.ok()) {
    round->round_ = *std::move(begun);
  } else {
    round->failure_ = begun.status();
  }
  return round;
}

absl::StatusOr<AverageOutcome> GradientAverager::AverageRound(const at::Tensor& flat, double weight,
                                                              const NamedTensors& state) {
  std::unique_ptr<GradientRound> round = BeginRound(weight, state);
  round->Add(flat, /*last=*/true);
  return round->Finish();
}

void GradientRound::Add(const at::Tensor& flat, bool last) {
  if (!failure_.ok()) return;
  absl::StatusOr<Buffer> buffer = BufferOf(flat);
  failure_ = buffer.ok() ? round_->Add(*buffer, last) : buffer.status();
}

absl::StatusOr<AverageOutcome> GradientRound::Finish() {
  if (!failure_.ok()) return failure_;
  absl::StatusOr<AverageOutcome> outcome = round_->Finish();
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
