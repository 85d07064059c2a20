// Fault-tolerant averaging with real processes: a group of hmc-fault-rank processes averages
// rounds while one rank is killed (SIGKILL) or stopped past the heartbeat timeout (SIGSTOP, then
// SIGCONT) at a random moment, the coordinator dies or restarts, or a rank joins. Every round must
// be committed by every survivor with the same contributors, weights and result bits, and the
// result must be the weighted average of the contributors it names, as computed here
// (perf/fault/fault_trial.cc). A bounded sample of the trials that hmc-fault runs by the hundred.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <utility>

#include "tests/fault/expect_clean_trial.h"

namespace hmc::fault {
namespace {

TrialSpec Spec(FaultKind fault, uint32_t seed) {
  TrialSpec spec;
  spec.rank_binary = HMC_FAULT_RANK_PATH;
  spec.work_dir = testing::TempDir();
  spec.fault = fault;
  spec.seed = seed;
  spec.rounds = 12;
  spec.count = 1 << 18;  // Large enough that a fault often lands inside a round.
  spec.pause = absl::Milliseconds(5);
  spec.stop_for = absl::Seconds(3);
  return spec;
}

TEST(ElasticAverage, WithoutFaultsEveryRoundCommitsOverEveryRank) {
  ExpectCleanTrial(Spec(FaultKind::kNone, 1));
}

class KilledRank : public testing::TestWithParam<uint32_t> {};

TEST_P(KilledRank, SurvivorsCommitEveryRoundAlike) {
  ExpectCleanTrial(Spec(FaultKind::kKill, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Seeds, KilledRank, testing::Values(11, 12, 13, 14));

class KilledRankInParts : public testing::TestWithParam<uint32_t> {};

// Each round's vector in four parts (BeginAverage), added over the step as a backward's buckets:
// the kill lands while some parts' all-reduces ran and others had not begun, or in the vote, and
// the survivors still commit every round alike (the retry averages every part again).
TEST_P(KilledRankInParts, SurvivorsCommitEveryRoundAlike) {
  TrialSpec spec = Spec(FaultKind::kKill, GetParam());
  spec.parts = 4;
  spec.pause = absl::Milliseconds(8);  // 2 ms between parts.
  ExpectCleanTrial(spec);
}

INSTANTIATE_TEST_SUITE_P(Seeds, KilledRankInParts, testing::Values(31, 32, 33));

class StoppedRank : public testing::TestWithParam<uint32_t> {};

// The stopped rank is declared failed after the heartbeat timeout (2 s), the others go on without
// it, and once continued it finds itself removed and exits 4 (fault_trial checks).
TEST_P(StoppedRank, SurvivorsGoOnAndTheRankIsRemoved) {
  ExpectCleanTrial(Spec(FaultKind::kStop, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Seeds, StoppedRank, testing::Values(21, 22));

class LostAtCreation : public testing::TestWithParam<std::pair<FaultKind, uint32_t>> {};

// A rank killed, or stopped until the coordinator removes it, while the group measures its links
// at creation: the others measure again in the next epoch and create the communicator without it,
// then commit every round alike, with the same measured links. Create used to fail on every rank
// ("probing links: ...").
TEST_P(LostAtCreation, TheOthersCreateTheGroupWithoutIt) {
  TrialSpec spec = Spec(GetParam().first, GetParam().second);
  spec.probe = true;
  spec.at_creation = true;
  std::optional<TrialResult> r = ExpectCleanTrial(spec);
  if (r.has_value()) {
    EXPECT_EQ(r->links_unknown, 0) << absl::StrJoin(r->problems, "\n");
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, LostAtCreation,
                         testing::Values(std::pair{FaultKind::kKill, 91u},
                                         std::pair{FaultKind::kKill, 92u},
                                         std::pair{FaultKind::kStop, 93u}));

// Collectives never go through the coordinator: when it dies, every rank keeps averaging with
// the membership it has.
TEST(ElasticAverage, LosingTheCoordinatorStopsNoRank) {
  ExpectCleanTrial(Spec(FaultKind::kCoordinator, 31));
}

// A coordinator restarted at the same address rebuilds the group from the ranks that come back,
// and then handles the next failure (a rank killed once it has).
TEST(ElasticAverage, RestartedCoordinatorRebuildsTheGroupAndHandlesTheNextFailure) {
  TrialSpec spec = Spec(FaultKind::kCoordinatorRestart, 41);
  spec.rounds = 60;  // Still averaging after the restart and the rebuild.
  ExpectCleanTrial(spec);
}

// A rank that joins the running group (one over the size it started with) connects to every
// member, becomes one in the next epoch (at a round boundary the members agree on) and
// contributes from the round the group is at.
TEST(ElasticAverage, AJoiningRankContributesFromTheGroupsRound) {
  TrialSpec spec = Spec(FaultKind::kJoin, 51);
  spec.rounds = 60;  // Still averaging when the joiner arrives.
  std::optional<TrialResult> r = ExpectCleanTrial(spec);
  // Its epoch starts at a round boundary: no round in flight is ended for it and tried again.
  if (r.has_value()) {
    EXPECT_EQ(r->retried, 0) << absl::StrJoin(r->problems, "\n");
  }
}

#ifdef HMC_HAVE_UCX
// Over UCX: a killed rank's survivors, and a rank that joins (its channels made by ExpectPeers on
// every member), keep every round alike.
TEST(ElasticAverage, OverUcxAKilledAndAJoiningRankKeepEveryRoundAlike) {
  setenv("UCX_NET_DEVICES", "lo", 1);  // UCX stays on loopback, as every test's traffic does.
  for (const auto& [fault, seed] : {std::pair{FaultKind::kKill, 15u}, {FaultKind::kJoin, 52u}}) {
    TrialSpec spec = Spec(fault, seed);
    spec.transport = "ucx";
    if (fault == FaultKind::kJoin) spec.rounds = 60;
    ExpectCleanTrial(spec);
  }
}
#endif

// Links probed when the group formed: a joiner's are not probed again but inferred (its own
// round trips, its stand-in's rates), and every survivor, the joiner too, ends with the same
// measured links.
TEST(ElasticAverage, AJoinersLinksAreKnownAlikeOnEveryRank) {
  for (FaultKind fault : {FaultKind::kJoin, FaultKind::kReplace}) {
    TrialSpec spec = Spec(fault, 81);
    spec.rounds = 60;
    spec.probe = true;
    std::optional<TrialResult> r = ExpectCleanTrial(spec);
    if (r.has_value()) {
      EXPECT_EQ(r->links_unknown, 0) << absl::StrJoin(r->problems, "\n");
    }
  }
}

class ReplacedRank : public testing::TestWithParam<uint32_t> {};

// A killed rank's replacement (a new process, as a restarted spot machine) joins the survivors.
TEST_P(ReplacedRank, TheReplacementJoinsTheSurvivors) {
  TrialSpec spec = Spec(FaultKind::kReplace, GetParam());
  spec.rounds = 60;
  ExpectCleanTrial(spec);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ReplacedRank, testing::Values(61, 62));

// With state (4 MiB the ranks keep in step): the joiner downloads it in its first round, in which
// it adds nothing, and from then on holds what every member holds, round after round; with the
// rounds in parts too, where the download rides on the last part's call.
TEST(ElasticAverage, AJoiningRankDownloadsTheStateAndKeepsItInStep) {
  for (FaultKind fault : {FaultKind::kJoin, FaultKind::kReplace}) {
    for (int parts : {1, 3}) {
      TrialSpec spec = Spec(fault, 71);
      spec.rounds = 60;
      spec.state = 1 << 20;
      spec.parts = parts;
      ExpectCleanTrial(spec);
    }
  }
}

}  // namespace
}  // namespace hmc::fault
