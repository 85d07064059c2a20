// CommunicatorImpl::Average and the two exchanges that make its rounds agree: the commit vote of
// each attempt and the reconciliation that opens each epoch (averaging.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "collectives/average_round.h"
#include "collectives/communicator_impl.h"
#include "core/log.h"

namespace hmc {
absl::Status CommunicatorImpl::VoteOnAttempt(CollectiveContext& ctx, const Group& g,
                                             AveragingAttempt* attempt) {
  auto superseded = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return MembershipChangedError(g.epoch, ledger_.reconciled_epoch,
                                  "a newer epoch was reconciled during the round");
  };
  {
    MutexLock lock(&mu_);
    // Once this rank told a newer epoch where it stands, that epoch's verdict decides the round.
    if (ledger_.reconciled_epoch > g.epoch) return superseded();
    ledger_.standing.complete = true;
    ledger_.standing.attempt_epoch = g.epoch;
    ledger_.contributors = g.ids;
    ledger_.weights = attempt->weights;
  }
  // The vote says "I hold the whole sum", and names the newest epoch that only adds members
  // this rank holds a table of: the members take the newest any of them named in after this
  // round, a call boundary, without ending a round for a join.
  uint32_t joins_known;
  {
    MutexLock lock(&mu_);
    joins_known = join_tables_.empty() ? 0 : join_tables_.rbegin()->first;
  }
  uint8_t* votes = ctx.Scratch(sizeof(uint32_t) * g.size());
  std::memcpy(votes + sizeof(uint32_t) * g.rank, &joins_known, sizeof(uint32_t));
  if (absl::Status s = ctx.ExchangeWithMembers(Phase::kCommit, 0, votes, sizeof(uint32_t));
      !s.ok()) {
    return s;
  }
  MutexLock lock(&mu_);
  if (ledger_.reconciled_epoch > g.epoch) return superseded();
  for (int r = 0; r < g.size(); ++r) {
    uint32_t named;
    std::memcpy(&named, votes + sizeof(uint32_t) * r, sizeof(uint32_t));
    agreed_epoch_ = std::max(agreed_epoch_, named);
  }
  RoundStanding& s = ledger_.standing;
  ++s.committed;
  s.in_round = false;
  s.complete = false;
  s.attempts = 0;
  attempt->committed = true;
  return absl::OkStatus();
}

void CommunicatorImpl::Reconcile(const std::shared_ptr<const Group>& g) {
  RoundStanding mine;
  {
    MutexLock lock(&mu_);
    ledger_.reconciled_epoch = g->epoch;
    mine = ledger_.standing;
  }
  const int n = g->size();
  std::vector<RoundStanding> all(n);
  all[g->rank] = mine;
  if (n > 1) {
    CollectiveContext ctx(g->rank, n, &g->channels, EpochSequence(g->epoch, 0),
                          absl::StrFormat("reconciliation of epoch %d", g->epoch),
                          absl::Now() + options_.timeout, static_cast<size_t>(options_.chunk_bytes),
                          &scratch_);
    uint8_t* bytes = ctx.Scratch(RoundStanding::kWireBytes * n);
    mine.Encode(bytes + RoundStanding::kWireBytes * g->rank);
    absl::Status s =
        ctx.ExchangeWithMembers(Phase::kReconcile, 0, bytes, RoundStanding::kWireBytes);
    if (!s.ok()) {
      // A member failed again (its link's failure or the next table starts the next epoch), or
      // did not answer in time, which nothing will resolve.
      Logf("comm", "rank %d: %s", id_, s.message());
      if (absl::IsDeadlineExceeded(s)) Abort(s);
      // A member whose link failed before this epoch began was reported in an epoch that has
      // ended: report it again, in this one.
      MutexLock lock(&mu_);
      for (int r = 0; r < n; ++r) {
        if (r != g->rank && !g->channels[r]->status().ok()) {
          failures_to_report_.push_back(
              {g->ids[r], std::string(g->channels[r]->status().message())});
        }
      }
      return;
    }
    for (int r = 0; r < n; ++r)
      all[r] = RoundStanding::Decode(bytes + RoundStanding::kWireBytes * r);
  }
  absl::StatusOr<RoundVerdict> verdict = DecideRound(all, g->rank);
  if (!verdict.ok()) {
    Abort(verdict.status());
    return;
  }
  MutexLock lock(&mu_);
  ledger_.verdict = *verdict;
  ledger_.verdict_epoch = g->epoch;
  ledger_.verdict_round = mine.committed;
  RoundStanding& s = ledger_.standing;
  if (s.newcomer) {
    // From now on this rank counts rounds with the group.
    s.newcomer = false;
    s.committed = RoundsAfter(all);
    Logf("comm", "rank %d: joins the averaging at round %d", id_, s.committed);
    return;
  }
  // Unless the round moved on meanwhile (an attempt of this epoch committed by its vote).
  if (*verdict == RoundVerdict::kNone || s.committed != mine.committed || !s.in_round) return;
  Logf("comm", "rank %d: averaging round %d: %s at epoch %d", id_, mine.committed,
       RoundVerdictName(*verdict), g->epoch);
  if (*verdict == RoundVerdict::kCommit) ++s.committed;
  if (*verdict != RoundVerdict::kRetry) {
    s.in_round = false;
    s.complete = false;
    s.attempts = 0;
  }
}

absl::Status CommunicatorImpl::PrepareAttempt(CollectiveContext& ctx,
                                              const std::vector<CallDescriptor>& all,
                                              AveragingAttempt* attempt) {
  attempt->weights.clear();
  std::vector<uint8_t> stale;
  for (const CallDescriptor& d : all) {
    attempt->weights.push_back(d.weight);
    stale.push_back(d.stale ? 1 : 0);
  }
  if (attempt->state == nullptr || std::find(stale.begin(), stale.end(), 1) == stale.end()) {
    return absl::OkStatus();
  }
  bool resume = false;
  if (attempt->stale) {
    MutexLock lock(&mu_);
    resume = state_tried_;
    state_tried_ = true;
  }
  absl::Status s = TransferState(ctx, stale, *attempt->state, resume, &attempt->download);
  if (s.ok() && attempt->stale) {
    const StateDownload& d = attempt->download;
    std::vector<std::string> from;
    for (size_t k = 0; k < d.sources.size(); ++k) {
      from.push_back(absl::StrFormat("%d from member %d", d.bytes_from[k], d.sources[k]));
    }
    Logf("comm", "rank %d: downloaded the members' state: %d of %d parts, %d bytes (%s) in %s", id_,
         d.parts_downloaded, d.parts, d.bytes, absl::StrJoin(from, ", "),
         absl::FormatDuration(d.time));
    MutexLock lock(&mu_);
    state_stale_ = false;
  }
  return s;
}

bool CommunicatorImpl::state_stale() const {
  MutexLock lock(&mu_);
  return state_stale_;
}

uint64_t CommunicatorImpl::averaging_rounds() const {
  MutexLock lock(&mu_);
  return ledger_.standing.committed;
}

absl::StatusOr<AverageOutcome> CommunicatorImpl::Average(const Buffer& buffer, double weight,
                                                         const CallOptions& call,
                                                         const SharedState* state) {
  // Refused before the round begins, as before any part of it.
  if (absl::Status s = CheckAveragePart(buffer); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<AverageRound>> round = BeginAverage(weight, call, state);
  if (!round.ok()) return round.status();
  if (absl::Status s = (*round)->Add(buffer, /*last=*/true); !s.ok()) return s;
  return (*round)->Finish();
}

absl::StatusOr<std::unique_ptr<AverageRound>> CommunicatorImpl::BeginAverage(
    double weight, const CallOptions& call, const SharedState* state) {
  if (absl::Status s = CheckAverageWeight(weight); !s.ok()) return s;
  uint64_t round = 0;
  // A rank whose state is stale computed its parts from it: they add nothing to this round.
  absl::StatusOr<bool> stale = EnterRound(state != nullptr, round);
  if (!stale.ok()) return stale.status();
  return std::make_unique<AverageRoundImpl>(this, weight, call, state, round, *stale);
}

absl::Status CommunicatorImpl::CheckAveragePart(const Buffer& part) const {
  if (part.dtype != DType::kF32 && part.dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Average takes float or double buffers, not %s", DTypeName(part.dtype)));
  }
  if (absl::Status s = CheckBuffers(part, part, part.count, part.count); !s.ok()) return s;
  return health();
}

absl::Status CommunicatorImpl::CheckAverageWeight(double weight) const {
  if (!std::isfinite(weight) || weight < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Average needs a finite weight of at least 0, not %g", weight));
  }
  return health();
}

absl::StatusOr<bool> CommunicatorImpl::EnterRound(bool with_state, uint64_t& round) {
  MutexLock lock(&mu_);
  const bool round_stale = with_state && state_stale_;
  if (!ready_told_ && coordinator_ != nullptr) {
    ready_told_ = true;
    ready_to_tell_ = true;  // The membership thread tells the coordinator.
  }
  RoundStanding& s = ledger_.standing;
  if (s.in_round) return absl::FailedPreconditionError("another Average is in progress");
  // Members that agreed to take joiners in after the last round do so before this one.
  auto caught_up = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return group_->epoch >= agreed_epoch_ || !broken_.ok() || stopping_;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&caught_up), absl::Now() + options_.timeout)) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "rank %d: the members agreed to start epoch %d after averaging round %d, but its table "
        "did not arrive within %s",
        id_, agreed_epoch_, s.committed, absl::FormatDuration(options_.timeout)));
  }
  if (!broken_.ok()) return broken_;
  s.in_round = true;
  s.attempts = 0;
  s.complete = false;
  round = s.committed;
  return round_stale;
}

std::shared_ptr<const Group> CommunicatorImpl::BeginAttempt() {
  MutexLock lock(&mu_);
  ++ledger_.standing.attempts;
  ledger_.standing.complete = false;
  ledger_.standing.attempt_epoch = group_->epoch;
  return group_;
}

void CommunicatorImpl::LeaveRound(uint64_t round) {
  MutexLock lock(&mu_);
  RoundStanding& s = ledger_.standing;
  if (s.in_round && s.committed == round) {
    s.in_round = false;
    s.complete = false;
    s.attempts = 0;
  }
}

CommunicatorImpl::DecidedRound CommunicatorImpl::AwaitRoundVerdict(uint32_t attempt_epoch,
                                                                   uint64_t round) {
  MutexLock lock(&mu_);
  auto decided = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return (ledger_.verdict_epoch > attempt_epoch && ledger_.verdict_round == round) ||
           !broken_.ok();
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&decided), absl::Now() + options_.timeout) ||
      !broken_.ok()) {
    return {};
  }
  return {ledger_.verdict, ledger_.standing.attempt_epoch, ledger_.contributors, ledger_.weights};
}

absl::StatusOr<AverageOutcome> CommunicatorImpl::CommitRound(AverageOutcome outcome,
                                                             DecidedRound committed) {
  outcome.epoch = committed.epoch;
  outcome.contributors = std::move(committed.ids);
  outcome.weights = std::move(committed.weights);
  // In rank order on every rank: the same bits everywhere.
  outcome.total_weight = std::accumulate(outcome.weights.begin(), outcome.weights.end(), 0.0);
  if (outcome.total_weight <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("averaging round %d: the contributors' weights sum to 0", outcome.round));
  }
  MutexLock lock(&mu_);
  if (committed.epoch > resumed_epoch_ && coordinator_ != nullptr &&
      group_->epoch == committed.epoch && group_->rank == 0) {
    resumed_epoch_ = committed.epoch;
    resumed_to_report_.push_back(committed.epoch);  // The membership thread tells the coordinator.
  }
  return outcome;
}

}  // namespace hmc
