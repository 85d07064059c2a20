#include "collectives/average_round.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace hmc {
namespace {

template <typename T>
void Scale(const uint8_t* in, uint8_t* out, size_t count, double factor, bool divide) {
  const T* x = reinterpret_cast<const T*>(in);
  T* y = reinterpret_cast<T*>(out);
  const T f = static_cast<T>(factor);
  for (size_t i = 0; i < count; ++i) y[i] = divide ? x[i] / f : x[i] * f;
}

// out = in * factor (or in / factor) element-wise, in the buffer's type.
void ScaleBuffer(DType dtype, const uint8_t* in, uint8_t* out, size_t count, double factor,
                 bool divide) {
  if (dtype == DType::kF32) {
    Scale<float>(in, out, count, factor, divide);
  } else {
    Scale<double>(in, out, count, factor, divide);
  }
}

// Adds what one part's call moved and cost to the attempt's report.
void AddTraffic(const CollectiveReport& part, CollectiveReport& total) {
  total.bytes_sent += part.bytes_sent;
  total.bytes_received += part.bytes_received;
  total.bytes_sent_across_zones += part.bytes_sent_across_zones;
  total.egress_usd += part.egress_usd;
}

}  // namespace

AverageRoundImpl::AverageRoundImpl(CommunicatorImpl* comm, double weight, CallOptions call,
                                   const SharedState* state, uint64_t round, bool stale)
    : comm_(comm), weight_(weight), call_(std::move(call)), state_(state), stale_(stale) {
  outcome_.round = round;
}

AverageRoundImpl::~AverageRoundImpl() {
  WaitForCalls();
  if (!finished_) comm_->LeaveRound(outcome_.round);
}

void AverageRoundImpl::WaitForCalls() {
  for (Part& p : parts_) {
    if (p.work != nullptr) p.work->Wait().IgnoreError();  // Its outcome is the attempt's.
  }
}

absl::Status AverageRoundImpl::Add(const Buffer& part, bool last) {
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("averaging round %d: a part after the last", outcome_.round));
  }
  if (absl::Status s = comm_->CheckAveragePart(part); !s.ok()) return s;
  if (parts_.empty()) {
    group_ = comm_->BeginAttempt();
    outcome_.attempts = 1;
  }
  Part& p = parts_.emplace_back();
  p.buffer = part;
  p.sum.resize(part.bytes());
  closed_ = last;
  Launch(parts_.size() - 1);
  return absl::OkStatus();
}

void AverageRoundImpl::Launch(size_t index) {
  Part& p = parts_[index];
  const size_t bytes = p.buffer.bytes();
  if (stale_) {
    std::memset(p.sum.data(), 0, bytes);  // Not 0 * buffer, which keeps NaNs.
  } else {
    ScaleBuffer(p.buffer.dtype, p.buffer.byte_data(), p.sum.data(), p.buffer.count, weight_,
                /*divide=*/false);
  }
  const bool closes = closed_ && index + 1 == parts_.size();
  std::vector<std::shared_ptr<Work>> earlier;
  if (closes) {
    for (size_t k = 0; k < index; ++k) earlier.push_back(parts_[k].work);
  }
  p.attempt = AveragingAttempt{.round = outcome_.round,
                               .weight = stale_ ? 0.0 : weight_,
                               .state = state_,
                               .stale = comm_->state_stale(),
                               .part = static_cast<uint32_t>(index),
                               .closes = closes,
                               .earlier = std::move(earlier)};
  const Buffer sum{p.sum.data(), p.buffer.count, p.buffer.dtype};
  p.work = comm_->LaunchAllReduce(group_, sum, sum, ReduceOp::kSum, call_, &p.attempt);
}

absl::Status AverageRoundImpl::AwaitAttempt() {
  absl::Status failure;
  for (Part& p : parts_) {
    const absl::Status s = p.work->Wait();
    if (!s.ok() && (failure.ok() || (IsMembershipChanged(s) && !IsMembershipChanged(failure)))) {
      failure = s;
    }
  }
  const AveragingAttempt& closing = parts_.back().attempt;
  outcome_.report = parts_.back().work->report();
  for (size_t k = 0; k + 1 < parts_.size(); ++k)
    AddTraffic(parts_[k].work->report(), outcome_.report);
  if (closing.download.parts > 0) {
    const uint64_t before = outcome_.state_download.bytes;
    outcome_.state_download = closing.download;
    outcome_.state_download.bytes += before;  // A resumed download counts both attempts.
  }
  if (closing.committed) return absl::OkStatus();
  if (failure.ok()) {
    return absl::InternalError(absl::StrFormat(
        "averaging round %d: an attempt ended without a vote or a failure", outcome_.round));
  }
  return failure;
}

absl::StatusOr<AverageOutcome> AverageRoundImpl::Finish() {
  if (finished_ || !closed_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("averaging round %d: Finish %s", outcome_.round,
                        finished_ ? "was called already" : "before the last part was added"));
  }
  finished_ = true;
  for (;;) {
    const absl::Status status = AwaitAttempt();
    if (status.ok()) {
      const AveragingAttempt& closing = parts_.back().attempt;
      return Commit({RoundVerdict::kCommit, group_->epoch, group_->ids, closing.weights});
    }
    if (!IsMembershipChanged(status)) {
      comm_->LeaveRound(outcome_.round);
      return status;
    }
    // Survivors stand in different places; the next epoch's reconciliation decides for all.
    CommunicatorImpl::DecidedRound decided =
        comm_->AwaitRoundVerdict(group_->epoch, outcome_.round);
    if (decided.verdict == RoundVerdict::kCommit) return Commit(std::move(decided));
    if (decided.verdict != RoundVerdict::kRetry) {
      comm_->LeaveRound(outcome_.round);
      if (decided.verdict == RoundVerdict::kGiveUp) {
        return MembershipChangedError(
            group_->epoch, comm_->group()->epoch,
            absl::StrFormat("averaging round %d given up after %d attempts: %s", outcome_.round,
                            outcome_.attempts, status.message()));
      }
      const absl::Status health = comm_->health();
      return health.ok() ? status : health;
    }
    group_ = comm_->BeginAttempt();
    ++outcome_.attempts;
    for (size_t k = 0; k < parts_.size(); ++k) Launch(k);
  }
}

absl::StatusOr<AverageOutcome> AverageRoundImpl::Commit(CommunicatorImpl::DecidedRound decided) {
  absl::StatusOr<AverageOutcome> outcome = comm_->CommitRound(outcome_, std::move(decided));
  if (!outcome.ok()) return outcome.status();
  for (Part& p : parts_) {
    ScaleBuffer(p.buffer.dtype, p.sum.data(), p.buffer.byte_data(), p.buffer.count,
                outcome->total_weight, /*divide=*/true);
  }
  return outcome;
}

}  // namespace hmc
