#ifndef HMC_DDP_DILOCO_H_
#define HMC_DDP_DILOCO_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "ddp/gradient_averager.h"
#include "ddp/training_state.h"

namespace torch::serialize {
class InputArchive;
class OutputArchive;
}  // namespace torch::serialize

namespace hmc::ddp {

struct DiLoCoOptions {
  // Local optimizer steps between two syncs (DiLoCo's H).
  int64_t inner_steps = 50;
  // The outer optimizer: SGD with Nesterov momentum on the averaged pseudo-gradient (DiLoCo's
  // published setting: 0.7 and 0.9).
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  // The pseudo-gradients travel as int8 with error feedback unless the caller names codecs.
  AveragingOptions averaging{.codec_inter = "int8", .codec_intra = "int8"};
  // Streaming DiLoCo: the parameters in this many contiguous fragments, each synced once every
  // inner_steps at staggered steps; its averaging overlaps the inner steps that follow, up to
  // inner_steps of them, and is applied at the first step after it completes. 1: every
  // parameter at once, blocking.
  int fragments = 1;
  bool broadcast_parameters = true;  // Start from rank 0's values.
  // Each sync is one Communicator::Average weighted by the samples since the last one: a peer
  // lost during it is simply absent (the survivors commit with their pseudo-gradients), a sync
  // that fails on every survivor alike is skipped (local progress is kept and goes into the next
  // one), and a rank that joins the running group downloads the outer parameters, the outer
  // momentum and the sync count in its first sync, where its own pseudo-gradient counts for
  // nothing. Needs fragments == 1 and float or double parameters of one type.
  bool fault_tolerant = false;
};

// DiLoCo (Douillard et al., 2023) for libtorch C++ trainers: each rank takes inner_steps steps
// with its own (inner) optimizer, then the group averages the pseudo-gradient — the outer
// parameters of the last sync minus the local ones — and every rank applies the same outer
// Nesterov step to the outer parameters and continues from them. Communication falls by the
// factor inner_steps against averaging every step. The inner optimizer's state stays local.
//   hmc::ddp::DiLoCo diloco(comm, model->parameters(), {.inner_steps = 20});
//   loss.backward(); adamw.step();
//   diloco.AfterInnerStep(batch);  // true when this step ended a sync
// Throws c10::Error on failure (a peer that died without fault tolerance, mismatched models).
class DiLoCo {
 public:
  DiLoCo(std::shared_ptr<Communicator> comm, std::vector<at::Tensor> parameters,
         DiLoCoOptions options = {});
  ~DiLoCo();
  DiLoCo(const DiLoCo&) = delete;
  DiLoCo& operator=(const DiLoCo&) = delete;

  // Call after every inner optimizer step with the step's samples (the weight of this rank's
  // pseudo-gradient when fault tolerant). Returns true when a sync completed in this call (of
  // any fragment, streaming). Streaming, the outer parameters of ranks agree once every
  // fragment's averaging in flight is applied (after Finish, say), not at every step.
  bool AfterInnerStep(double samples = 1);
  // Streaming: waits for the fragments in flight and applies them. Call once at the end.
  void Finish();

  // Checkpoints. Save writes the outer state a resumed run needs to go on as it would have: the
  // outer parameters and momentum, the inner step count (where the next sync falls) and the outer
  // steps, equal on every rank. Streaming, fragments still in flight are left out, like a skipped
  // sync: their steps go into the fragment's next pseudo-gradient. Error-feedback residuals are
  // not kept (they start again from zero).
  void Save(torch::serialize::OutputArchive& archive) const;
  // Collective, before the first inner step: every rank takes rank 0's outer state, read there
  // from `archive` (ignored elsewhere; null on rank 0: start afresh from the current parameters),
  // and its parameters become the outer ones. A rank's own progress since the last sync and its
  // inner optimizer are its own to restore after this (the examples keep a file per rank).
  // Throws c10::Error on every rank when rank 0's archive does not fit the model.
  void Restore(torch::serialize::InputArchive* archive);

  int64_t inner_steps() const { return inner_step_; }
  // The outer parameters, flat: equal on every rank (what to evaluate or checkpoint as the
  // group's model).
  const at::Tensor& outer_parameters() const { return outer_; }
  // Runs `body` with the parameters set to the outer ones (to evaluate the group's model), then
  // puts this rank's own back.
  void WithOuterParameters(const std::function<void()>& body);
  // Outer steps taken (per fragment, streaming: summed over fragments); fault tolerant, the
  // group's count, which a joiner learns in its first sync.
  int64_t outer_steps() const;
  // Fault tolerant: syncs skipped because they failed on every survivor, and the last committed
  // sync's contributors.
  int64_t skipped_syncs() const { return skipped_; }
  const AverageOutcome& last_sync() const { return last_sync_; }
  Traffic traffic() const { return averager_.traffic(); }

 private:
  struct Fragment {
    int64_t begin = 0;  // Range in the flat parameter vector.
    int64_t numel = 0;
    int64_t offset = 0;  // Syncs at inner steps t with (t + offset) % inner_steps == 0.
    // In flight (streaming): the local values when it started, and its averaging.
    at::Tensor local_at_start;
    c10::intrusive_ptr<c10::ivalue::Future> averaging;
  };

  // A copy of the flat parameters, all of them or the range [begin, begin + numel).
  at::Tensor Flatten() const;
  at::Tensor Flatten(int64_t begin, int64_t numel) const;
  void WriteParameters(int64_t begin, const at::Tensor& values);
  // The outer Nesterov step on the range [begin, begin + numel) with the averaged
  // pseudo-gradient in delta_.
  void OuterStep(int64_t begin, int64_t numel);
  void SyncBlocking();
  // False when the sync was given up on every survivor (skipped).
  bool SyncFaultTolerant(double samples);
  void StartFragment(size_t f);
  void ApplyFragment(size_t f);

  std::shared_ptr<Communicator> comm_;
  std::vector<at::Tensor> parameters_;
  const DiLoCoOptions options_;
  GradientAverager averager_;
  at::Tensor outer_;     // Flat outer parameters: equal on every rank.
  at::Tensor momentum_;  // Flat outer momentum: equal on every rank.
  at::Tensor delta_;     // Flat pseudo-gradient, averaged in place.
  std::vector<Fragment> fragments_;
  TrainingState state_;  // Fault tolerant: outer parameters, momentum and sync count.
  int64_t inner_step_ = 0;
  int64_t outer_steps_ = 0;
  int64_t skipped_ = 0;
  double samples_since_sync_ = 0;
  AverageOutcome last_sync_;
};

}  // namespace hmc::ddp

#endif  // HMC_DDP_DILOCO_H_
