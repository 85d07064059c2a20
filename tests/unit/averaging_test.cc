// The verdict that survivors of a failure reach on an open averaging round (averaging.h), for
// every place a rank can stand: the same standings must give every member a consistent verdict,
// and a round may commit only where every member of its attempt held the whole sum.
#include "collectives/averaging.h"

#include <gtest/gtest.h>

#include "collectives/collective_context.h"

namespace hmc {
namespace {

RoundStanding InRound(uint64_t round, bool complete, uint32_t epoch, uint32_t attempts = 1) {
  return RoundStanding{round, true, complete, epoch, attempts};
}
RoundStanding Between(uint64_t committed) { return RoundStanding{committed, false, false, 0, 0}; }

std::vector<RoundVerdict> Verdicts(const std::vector<RoundStanding>& members) {
  std::vector<RoundVerdict> out;
  for (size_t i = 0; i < members.size(); ++i) {
    absl::StatusOr<RoundVerdict> v = DecideRound(members, static_cast<int>(i));
    EXPECT_TRUE(v.ok()) << v.status();
    out.push_back(v.ok() ? *v : RoundVerdict::kNone);
  }
  return out;
}

using V = RoundVerdict;

TEST(DecideRound, EveryMemberHoldingTheSumOfOneAttemptCommits) {
  EXPECT_EQ(Verdicts({InRound(4, true, 2), InRound(4, true, 2), InRound(4, true, 2)}),
            (std::vector<V>{V::kCommit, V::kCommit, V::kCommit}));
}

TEST(DecideRound, AMemberThatCommittedMakesTheOthersCommit) {
  // Rank 1's vote completed before the failure; the others missed a vote.
  EXPECT_EQ(Verdicts({InRound(4, true, 2), Between(5), InRound(4, true, 2)}),
            (std::vector<V>{V::kCommit, V::kNone, V::kCommit}));
  // ...and rank 1 already began the next round: that one is retried.
  EXPECT_EQ(Verdicts({InRound(4, true, 2), InRound(5, false, 2), InRound(4, true, 2)}),
            (std::vector<V>{V::kCommit, V::kRetry, V::kCommit}));
}

TEST(DecideRound, AMemberWithoutTheSumMakesEveryoneRetry) {
  EXPECT_EQ(Verdicts({InRound(4, true, 2), InRound(4, false, 2), InRound(4, true, 2)}),
            (std::vector<V>{V::kRetry, V::kRetry, V::kRetry}));
  // A member that has not entered the round yet: nobody can hold its sum.
  EXPECT_EQ(Verdicts({InRound(4, false, 2), Between(4)}), (std::vector<V>{V::kRetry, V::kNone}));
}

TEST(DecideRound, SumsOfDifferentAttemptsDoNotCommit) {
  EXPECT_EQ(Verdicts({InRound(4, true, 2), InRound(4, true, 3)}),
            (std::vector<V>{V::kRetry, V::kRetry}));
}

TEST(DecideRound, GivesUpOnceAnyMemberUsedItsAttempts) {
  EXPECT_EQ(Verdicts({InRound(4, false, 3, kMaxAverageAttempts), InRound(4, false, 3, 1)}),
            (std::vector<V>{V::kGiveUp, V::kGiveUp}));
}

TEST(DecideRound, ImpossibleStandingsAreErrors) {
  EXPECT_FALSE(DecideRound({Between(3), Between(5)}, 0).ok());
  // Another member committed round 4, yet this one never held its sum.
  EXPECT_FALSE(DecideRound({InRound(4, false, 2), Between(5)}, 0).ok());
}

TEST(RoundStanding, SurvivesTheWire) {
  const RoundStanding s{123456789012, true, true, 77, 2};
  uint8_t wire[RoundStanding::kWireBytes];
  s.Encode(wire);
  const RoundStanding back = RoundStanding::Decode(wire);
  EXPECT_EQ(back.committed, s.committed);
  EXPECT_EQ(back.in_round, s.in_round);
  EXPECT_EQ(back.complete, s.complete);
  EXPECT_EQ(back.attempt_epoch, s.attempt_epoch);
  EXPECT_EQ(back.attempts, s.attempts);
}

TEST(EpochTags, EveryTagOfAnEarlierEpochIsBelowTheFloor) {
  const uint64_t floor = EpochTagFloor(5);
  EXPECT_LT(MakeTag(EpochSequence(4, 0x3fff), Phase::kReconcile, 0xfff, 0xfffff), floor);
  EXPECT_GE(MakeTag(EpochSequence(5, 0), Phase::kArgCheck, 0, 0), floor);
  EXPECT_TRUE(IsMembershipChanged(MembershipChangedError(1, 2, "rank 3 failed")));
  EXPECT_FALSE(IsMembershipChanged(absl::AbortedError("membership changed")));
}

}  // namespace
}  // namespace hmc
