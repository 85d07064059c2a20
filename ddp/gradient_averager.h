#ifndef HMC_DDP_GRADIENT_AVERAGER_H_
#define HMC_DDP_GRADIENT_AVERAGER_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "collectives/communicator.h"
#include "core/mutex.h"
#include "ddp/traffic.h"
#include "ddp/training_state.h"

namespace hmc::ddp {

struct AveragingOptions {
  std::string codec_inter;     // Empty: the communicator's option (HMC_CODEC_INTER).
  std::string codec_intra;     // Empty: the communicator's option (HMC_CODEC_INTRA).
  bool error_feedback = true;  // Keep each bucket's residual of lossy codecs for its next step.
};

// A fault-tolerant averaging round (Communicator::BeginAverage) over flat tensors (float or
// double, dense, CPU) added as backward makes them ready, with the codecs per link class. Each
// tensor is averaged in place on commit; it must stay alive and unchanged until Finish returns.
// A round that could not begin, or a tensor it could not take, is kept for Finish to return, so
// that backward's hooks never throw.
class GradientRound {
 public:
  void Add(const at::Tensor& flat, bool last);
  // The round's outcome (its traffic counted in the averager's totals), or why it failed.
  absl::StatusOr<AverageOutcome> Finish();

 private:
  friend class GradientAverager;
  GradientRound() = default;

  SharedState state_;  // Outlives round_, which reads it.
  std::unique_ptr<AverageRound> round_;
  absl::Status failure_;
  std::shared_ptr<TrafficMeter> meter_;
};

// Averages flat gradient tensors (buckets) across the group with the codec per link class,
// keeping one error-feedback residual per bucket key. What the comm hook, the DDP helper and the
// collaborative optimizer share. Every rank must start the same buckets in the same order.
class GradientAverager {
 public:
  GradientAverager(std::shared_ptr<Communicator> comm, AveragingOptions options);

  // Starts reducing `flat` (dense, contiguous, CPU) in place; it must stay alive until the
  // returned future completes (the future holds it). `op`: avg for gradients; the collaborative
  // optimizer sums sample-weighted gradients.
  c10::intrusive_ptr<c10::ivalue::Future> Start(const at::Tensor& flat, size_t bucket,
                                                ReduceOp op = ReduceOp::kAvg);

  // Begins a fault-tolerant averaging round weighted by `weight`; `state`: the named tensors
  // (dense, CPU) a joining rank downloads (none when empty), alive and unchanged until the
  // round's Finish returns.
  std::unique_ptr<GradientRound> BeginRound(double weight, const NamedTensors& state = {});
  // One such round over `flat` alone.
  absl::StatusOr<AverageOutcome> AverageRound(const at::Tensor& flat, double weight,
                                              const NamedTensors& state = {});

  Communicator& communicator() { return *comm_; }
  std::shared_ptr<Communicator> shared_communicator() const { return comm_; }
  Traffic traffic() const { return meter_->totals(); }

 private:
  std::shared_ptr<Communicator> comm_;
  const AveragingOptions options_;
  std::shared_ptr<TrafficMeter> meter_ = std::make_shared<TrafficMeter>();
  Mutex mu_;
  std::map<size_t, CodecFeedback> feedback_ ABSL_GUARDED_BY(mu_);  // Nodes never move.
};

// Copies rank 0's parameters (and buffers) to every rank, in place: what DDP does at
// construction so that every replica starts equal. Throws c10::Error on failure.
void BroadcastFromRankZero(Communicator& comm, const std::vector<at::Tensor>& tensors);

}  // namespace hmc::ddp

#endif  // HMC_DDP_GRADIENT_AVERAGER_H_
