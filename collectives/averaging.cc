#include "collectives/averaging.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace hmc {
namespace {

constexpr char kMembershipPayload[] = "hmc.membership_changed";

// Retry while no member of the round has used up its attempts.
RoundVerdict RetryOrGiveUp(const std::vector<RoundStanding>& members, uint64_t round) {
  uint32_t attempts = 0;
  for (const RoundStanding& m : members) {
    if (m.in_round && m.committed == round) attempts = std::max(attempts, m.attempts);
  }
  return attempts < kMaxAverageAttempts ? RoundVerdict::kRetry : RoundVerdict::kGiveUp;
}

}  // namespace

void RoundStanding::Encode(uint8_t* out) const {
  std::memset(out, 0, kWireBytes);
  std::memcpy(out, &committed, 8);
  out[8] = in_round ? 1 : 0;
  out[9] = complete ? 1 : 0;
  out[10] = newcomer ? 1 : 0;
  std::memcpy(out + 12, &attempt_epoch, 4);
  std::memcpy(out + 16, &attempts, 4);
}

RoundStanding RoundStanding::Decode(const uint8_t* in) {
  RoundStanding s;
  std::memcpy(&s.committed, in, 8);
  s.in_round = in[8] != 0;
  s.complete = in[9] != 0;
  s.newcomer = in[10] != 0;
  std::memcpy(&s.attempt_epoch, in + 12, 4);
  std::memcpy(&s.attempts, in + 16, 4);
  return s;
}

const char* RoundVerdictName(RoundVerdict verdict) {
  switch (verdict) {
    case RoundVerdict::kNone:
      return "none";
    case RoundVerdict::kCommit:
      return "commit";
    case RoundVerdict::kRetry:
      return "retry";
    case RoundVerdict::kGiveUp:
      return "give up";
  }
  return "unknown";
}

absl::StatusOr<RoundVerdict> DecideRound(const std::vector<RoundStanding>& members, int self) {
  if (members[self].newcomer) return RoundVerdict::kNone;
  uint64_t least = members[self].committed, most = least;
  for (const RoundStanding& m : members) {
    if (m.newcomer) continue;
    least = std::min(least, m.committed);
    most = std::max(most, m.committed);
  }
  if (most - least > 1) {
    return absl::InternalError(absl::StrFormat(
        "members' committed averaging rounds differ by more than one (%d and %d)", least, most));
  }
  const RoundStanding& me = members[self];
  if (!me.in_round) return RoundVerdict::kNone;
  if (most > least) {
    // A member committed round `least`: its vote saw every member of that attempt hold the sum.
    if (me.committed == most) return RetryOrGiveUp(members, most);
    if (!me.complete) {
      return absl::InternalError(absl::StrFormat(
          "a member committed averaging round %d, but this rank does not hold its sum", least));
    }
    return RoundVerdict::kCommit;
  }
  bool all_complete = true;
  for (const RoundStanding& m : members) {
    all_complete &= m.newcomer || (m.in_round && m.complete && m.attempt_epoch == me.attempt_epoch);
  }
  return all_complete ? RoundVerdict::kCommit : RetryOrGiveUp(members, me.committed);
}

uint64_t RoundsAfter(const std::vector<RoundStanding>& members) {
  uint64_t rounds = 0;
  for (size_t r = 0; r < members.size(); ++r) {
    absl::StatusOr<RoundVerdict> verdict = DecideRound(members, static_cast<int>(r));
    const bool commits = verdict.ok() && *verdict == RoundVerdict::kCommit;
    if (!members[r].newcomer) rounds = std::max(rounds, members[r].committed + (commits ? 1 : 0));
  }
  return rounds;
}

bool EarlierPartsSummed(const AveragingAttempt& closing) {
  bool summed = true;
  for (const std::shared_ptr<Work>& part : closing.earlier) summed &= part->Wait().ok();
  return summed;
}

absl::Status MembershipChangedError(uint32_t from, uint32_t to, const std::string& cause) {
  absl::Status s = absl::AbortedError(
      absl::StrFormat("membership changed: epoch %d -> %d (%s); retry", from, to, cause));
  s.SetPayload(kMembershipPayload, absl::Cord(absl::StrFormat("%d", to)));
  return s;
}

bool IsMembershipChanged(const absl::Status& status) {
  return absl::IsAborted(status) && status.GetPayload(kMembershipPayload).has_value();
}

}  // namespace hmc
