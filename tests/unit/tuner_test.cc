// The share solver, the tuner's rules, egress prices and the link matrix's wire form.
#include "collectives/tuner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "absl/strings/match.h"
#include "collectives/egress.h"
#include "collectives/link_probe.h"
#include "collectives/plan_trials.h"
#include "collectives/shares.h"

namespace hmc {
namespace {

// The slowest peer's time under the butterfly's model, for a vector of size 1.
double SlowestTime(const std::vector<double>& shares, const std::vector<double>& bandwidth) {
  const double n = static_cast<double>(shares.size());
  double worst = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    worst = std::max(worst, (1 + (n - 2) * shares[i]) / bandwidth[i]);
  }
  return worst;
}

TEST(BalancedShares, EqualLinksGetEqualShares) {
  for (double s : BalancedShares({100, 100, 100, 100})) EXPECT_NEAR(s, 0.25, 1e-9);
}

TEST(BalancedShares, APeerAtATenthReducesNothingAndTheSlowestTimeDrops) {
  const std::vector<double> bandwidth = {1000, 1000, 1000, 1000, 1000, 100};
  const std::vector<double> shares = BalancedShares(bandwidth);
  EXPECT_NEAR(std::accumulate(shares.begin(), shares.end(), 0.0), 1.0, 1e-9);
  EXPECT_EQ(shares[5], 0.0);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(shares[i], 0.2, 1e-9);
  const std::vector<double> equal(6, 1.0 / 6);
  EXPECT_LT(SlowestTime(shares, bandwidth), SlowestTime(equal, bandwidth) / 1.6);
}

TEST(BalancedShares, NoBetterSplitExistsNearby) {
  const std::vector<double> bandwidth = {300, 120, 900, 450, 60};
  const std::vector<double> shares = BalancedShares(bandwidth);
  const double best = SlowestTime(shares, bandwidth);
  // Moving a little share from any peer to any other makes the slowest peer slower.
  for (size_t from = 0; from < shares.size(); ++from) {
    for (size_t to = 0; to < shares.size(); ++to) {
      if (from == to || shares[from] < 0.01) continue;
      std::vector<double> moved = shares;
      moved[from] -= 0.01;
      moved[to] += 0.01;
      EXPECT_GE(SlowestTime(moved, bandwidth), best - 1e-12) << from << "->" << to;
    }
  }
}

TEST(PartsByWeight, CoverEveryElementOnceInProportion) {
  const std::vector<Range> parts = PartsByWeight(1000, {1, 0, 3});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].begin, 0u);
  EXPECT_EQ(parts[0].count, 250u);
  EXPECT_EQ(parts[1].count, 0u);
  EXPECT_EQ(parts[2].begin, 250u);
  EXPECT_EQ(parts[2].count, 750u);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000003}}) {
    size_t at = 0;
    for (const Range& r : PartsByWeight(count, {0.3, 0.1, 0.1, 0.5})) {
      EXPECT_EQ(r.begin, at);
      at = r.end();
    }
    EXPECT_EQ(at, count);
  }
}

LinkMatrix Matrix(const std::vector<std::vector<double>>& mbit, double rtt_ms) {
  LinkMatrix m;
  m.size = static_cast<int>(mbit.size());
  for (int a = 0; a < m.size; ++a) {
    for (int b = 0; b < m.size; ++b) {
      m.mbit.push_back(mbit[a][b]);
      m.rtt_ms.push_back(a == b ? 0 : rtt_ms);
    }
  }
  m.auto_codec_bytes_per_s = 4e9;  // 32 Gbit/s.
  return m;
}

TEST(Tuner, FollowsTheDocumentedRules) {
  const LinkMatrix even = Matrix({{0, 500, 500}, {500, 0, 500}, {500, 500, 0}}, 100);
  const LinkMatrix skewed = Matrix({{0, 500, 50}, {500, 0, 50}, {50, 50, 0}}, 100);
  TunerInput in;
  in.bytes = 64 << 20;
  in.zone_of = {0, 1, 2};
  in.links = &even;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "ring");
  in.links = &skewed;
  absl::StatusOr<AllReducePlan> plan = ChoosePlan(in);
  EXPECT_EQ(plan->algorithm, "butterfly");
  EXPECT_LT(plan->shares[2], plan->shares[0]);
  in.zone_of = {0, 0, 1};
  EXPECT_EQ(ChoosePlan(in)->algorithm, "hierarchical");
  in.bytes = 1000;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "one_shot");  // 100 ms round trips: one latency.
  in.algo = "ring";
  EXPECT_EQ(ChoosePlan(in)->algorithm, "ring");
  EXPECT_EQ(ChoosePlan(in)->why, "forced");
}

// Small messages: one-shot where latency dominates, halving-doubling where the (n-1) copies of
// the vector would take longer than the latencies it saves.
TEST(Tuner, SmallMessagesGoOneShotWhileLatencyDominates) {
  // Eight ranks across continents: 200 ms round trips, 10 Mbit/s.
  std::vector<std::vector<double>> rates(8, std::vector<double>(8, 10));
  for (int i = 0; i < 8; ++i) rates[i][i] = 0;
  const LinkMatrix wan = Matrix(rates, 200);
  TunerInput in;
  in.zone_of = {0, 1, 2, 3, 4, 5, 6, 7};
  in.links = &wan;
  in.bytes = 4 << 10;
  absl::StatusOr<AllReducePlan> plan = ChoosePlan(in);
  EXPECT_EQ(plan->algorithm, "one_shot") << plan->why;
  EXPECT_THAT(plan->why, testing::HasSubstr("one-shot"));
  // 7 × 200 KiB at 1.25 MB/s take 1.15 s, twice 200 KiB 0.33 s: more than the 0.6 s of
  // latencies that one-shot saves (its data travels with the argument check's exchange).
  in.bytes = 200 << 10;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "halving_doubling");
  // Unmeasured (a data centre is assumed): one-shot for a few KiB, not for 200 KiB on 8 ranks.
  in.links = nullptr;
  in.bytes = 1 << 10;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "one_shot");
  in.bytes = 200 << 10;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "halving_doubling");
}

// Ranks that share a host's CPUs copy every byte on the cores they share: there one-shot's
// (n-1) copies of a 64 KiB vector cost more than halving-doubling's three extra latencies
// (4 ranks on 2 cores: 298 against 359 µs, perf/RESULTS.md), while 16 KiB stays one-shot.
TEST(Tuner, RanksThatShareCoresLeaveOneShotSooner) {
  TunerInput in;
  in.zone_of = {0, 0, 0, 0};
  in.bytes = 64 << 10;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "one_shot");  // A core each.
  in.cpu_share = 0.5;
  absl::StatusOr<AllReducePlan> plan = ChoosePlan(in);
  EXPECT_EQ(plan->algorithm, "halving_doubling") << plan->why;
  in.bytes = 16 << 10;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "one_shot");
  // Measured links carry what sharing cost them already: their rate decides.
  const LinkMatrix fast = Matrix({{0, 100000, 100000, 100000},
                                  {100000, 0, 100000, 100000},
                                  {100000, 100000, 0, 100000},
                                  {100000, 100000, 100000, 0}},
                                 0.1);
  in.links = &fast;
  in.bytes = 64 << 10;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "one_shot");
}

// Above small_message_bytes, a vector of a few hundred KiB across a 100 ms round trip still waits
// mostly for round trips: one-shot where the bandwidth model says so, the rules' plan where the
// round trips are short or the vector is past what rides on the argument check.
TEST(Tuner, AVectorOfHundredsOfKiBGoesOneShotOnlyWhereRoundTripsDominate) {
  std::vector<std::vector<double>> rates = {
      {0, 1000, 100, 100}, {1000, 0, 100, 100}, {100, 100, 0, 1000}, {100, 100, 1000, 0}};
  const LinkMatrix ocean = Matrix(rates, 100);
  const LinkMatrix data_centre = Matrix(rates, 0.5);
  TunerInput in;
  in.zone_of = {0, 0, 1, 1};
  in.bytes = 400 << 10;
  in.links = &ocean;
  absl::StatusOr<AllReducePlan> plan = ChoosePlan(in);
  EXPECT_EQ(plan->algorithm, "one_shot") << plan->why;
  EXPECT_THAT(plan->why, testing::HasSubstr("latency-bound"));
  in.links = &data_centre;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "hierarchical");
  in.links = &ocean;
  in.bytes = 2 << 20;
  EXPECT_EQ(ChoosePlan(in)->algorithm, "hierarchical");
  in.bytes = 400 << 10;
  // A codec on the links between zones: the plan that encodes them stays, one-shot would send
  // the vectors as they are. Inside zones only, where all four ranks share one, it is no matter.
  in.codec_inter = "int8";
  EXPECT_EQ(ChoosePlan(in)->algorithm, "hierarchical");
  in.zone_of = {0, 1, 2, 3};
  in.codec_inter = "none";
  in.codec_intra = "int8";
  EXPECT_EQ(ChoosePlan(in)->algorithm, "one_shot");
  in.algo = "ring";
  EXPECT_EQ(ChoosePlan(in)->algorithm, "ring");
}

TEST(Tuner, AutoCodecCompressesOnlyLinksSlowerThanTheCodec) {
  // 500 Mbit/s across zones, 40 Gbit/s inside: int8 across, nothing inside.
  const LinkMatrix m = Matrix({{0, 40000, 500}, {40000, 0, 500}, {500, 500, 0}}, 10);
  TunerInput in;
  in.bytes = 64 << 20;
  in.zone_of = {0, 0, 1};
  in.links = &m;
  in.codec_inter = "auto";
  in.codec_intra = "auto";
  in.codec_encode_bytes_per_s = m.auto_codec_bytes_per_s;
  absl::StatusOr<AllReducePlan> plan = ChoosePlan(in);
  EXPECT_EQ(plan->codec_inter, kAutoCodec);
  EXPECT_EQ(plan->codec_intra, "none");
}

TEST(Tuner, SharesAndFingerprints) {
  TunerInput in;
  in.bytes = 64 << 20;
  in.zone_of = {0, 0, 0};
  in.shares = "1,2";
  EXPECT_TRUE(absl::StrContains(ChoosePlan(in).status().message(), "2 weights for 3 ranks"));
  in.shares = "1,1,2";
  absl::StatusOr<AllReducePlan> a = ChoosePlan(in);
  EXPECT_NEAR(a->shares[2], 2.0, 1e-12);
  in.shares = "2,2,4";  // The same split: the same fingerprint.
  EXPECT_EQ(ChoosePlan(in)->Fingerprint(), a->Fingerprint());
  in.codec_inter = "fp16";
  EXPECT_NE(ChoosePlan(in)->Fingerprint(), a->Fingerprint());
  // Short vectors get shorter segments so that they still pipeline.
  in.bytes = 3 << 20;
  EXPECT_EQ(ChoosePlan(in)->chunk_bytes, size_t{256} << 10);
}

TEST(PriceTable, DefaultsFollowTheReferencePrices) {
  const PriceTable prices = PriceTable::Default();
  EXPECT_EQ(prices.UsdPerGb("us", "us"), 0);
  EXPECT_EQ(prices.UsdPerGb("us", "eu"), 0.08);
  EXPECT_EQ(prices.UsdPerGb("eu", "oce"), 0.15);
  EXPECT_EQ(prices.UsdPerGb("onprem", "gc-us"), 0);
  EXPECT_EQ(prices.UsdPerGb("aws-us", "gc-eu"), 0.02);
}

TEST(PriceTable, ParsesFilesAndNamesBadLines) {
  absl::StatusOr<PriceTable> t = PriceTable::Parse("# comment\nus eu 0.5\n* * 0.01\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->UsdPerGb("us", "eu"), 0.5);
  EXPECT_EQ(t->UsdPerGb("eu", "us"), 0.01);
  absl::Status bad = PriceTable::Parse("us eu\n").status();
  EXPECT_TRUE(absl::StrContains(bad.message(), "line 1")) << bad;
  EXPECT_FALSE(PriceTable::Load("/nonexistent/prices").ok());
}

TEST(LinkMatrix, RowsTravelAsTextAndBack) {
  const LinkMatrix m = Matrix({{0, 10, 20}, {30, 0, 40}, {50, 60, 0}}, 7.5);
  LinkMatrix copy;
  copy.size = 3;
  copy.rtt_ms.assign(9, 0);
  copy.mbit.assign(9, 0);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(copy.ParseRow(r, m.SerializeRow(r)).ok());
  EXPECT_EQ(copy.mbit, m.mbit);
  EXPECT_EQ(copy.rtt_ms, m.rtt_ms);
  EXPECT_FALSE(copy.ParseRow(0, "1/2,3").ok());
  EXPECT_FALSE(copy.ParseRow(0, "1/x,3/4,5/6").ok());
  EXPECT_TRUE(absl::StrContains(m.ToTable(), "60.0"));
  EXPECT_EQ(m.PeerBandwidth()[0], std::min(10.0 + 20, 30.0 + 50));
}

TEST(PlanTrials, TriesEveryCandidateTwiceInOrderThenKeepsTheFastest) {
  PlanTrials trials;
  const std::vector<std::string> candidates = {"hierarchical", "butterfly", "ring"};
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (int i = 0; i < 6; ++i) {
    const PlanTrials::Step step = trials.Next("64M", candidates, deadline);
    EXPECT_EQ(step.algorithm, candidates[i % 3]);
    EXPECT_EQ(step.trial, i);
  }
  // Another class keeps its own trials.
  EXPECT_EQ(trials.Next("1M", candidates, deadline).trial, 0);
  // The choice waits for the trials still running, here on another thread. Hierarchical's first
  // trial ran on cold links: its second counts.
  std::thread finisher([&] {
    absl::SleepFor(absl::Milliseconds(50));
    for (auto [trial, seconds] : std::vector<std::pair<int, double>>{
             {0, 9.0}, {2, PlanTrials::kFailed}, {1, 1.5}, {3, 1.2}, {4, 1.6}, {5, 3.0}}) {
      trials.Finished("64M", trial, seconds);
    }
  });
  const PlanTrials::Step chosen = trials.Next("64M", candidates, deadline);
  finisher.join();
  EXPECT_EQ(chosen.algorithm, "hierarchical");
  EXPECT_EQ(chosen.trial, -1);
  EXPECT_TRUE(absl::StrContains(chosen.why, "hierarchical 1.2 s, butterfly 1.5 s, ring 3 s"))
      << chosen.why;
  EXPECT_EQ(trials.Next("64M", candidates, deadline).algorithm, "hierarchical");
}

// The chosen plan is timed every kTimedEvery-th call; once its recent times are worse than
// another candidate's by the margin, that candidate is re-tried, and chosen if it still wins.
TEST(PlanTrials, AChosenPlanThatSlowsDownIsRetriedAgainstTheOthers) {
  PlanTrials trials;
  const std::vector<std::string> candidates = {"ring", "butterfly"};
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int timed = 0;
  auto finish_all = [&](double ring, double butterfly) {
    // Every call up to the next timed one, each timed one finished with its candidate's time.
    for (;;) {
      const PlanTrials::Step step = trials.Next("c", candidates, deadline);
      if (step.trial < 0) continue;
      trials.Finished("c", step.trial, step.algorithm == "ring" ? ring : butterfly);
      ++timed;
      return step;
    }
  };
  for (int i = 0; i < 4; ++i) finish_all(1.0, 2.0);  // The trials: ring wins.
  EXPECT_EQ(trials.Next("c", candidates, deadline).algorithm, "ring");
  // Ring slows down (the path changed): its timed calls take 3 s, butterfly's trials said 2 s.
  PlanTrials::Step step = finish_all(3.0, 2.0);
  EXPECT_EQ(step.algorithm, "ring");
  step = finish_all(3.0, 2.0);
  EXPECT_EQ(step.algorithm, "ring");  // Ring's last three: 1, 3, 3: its median is now 3 s.
  step = finish_all(3.0, 2.0);
  EXPECT_EQ(step.algorithm, "butterfly");
  EXPECT_TRUE(absl::StrContains(step.why, "re-trial of butterfly")) << step.why;
  step = finish_all(3.0, 2.0);
  EXPECT_EQ(step.algorithm, "butterfly");
  EXPECT_TRUE(absl::StrContains(step.why, "switched after a re-trial")) << step.why;
  for (int i = 0; i < PlanTrials::kTimedEvery - 1; ++i) {
    EXPECT_EQ(trials.Next("c", candidates, deadline).algorithm, "butterfly");
  }
  // A candidate within the margin does not disturb the choice.
  step = finish_all(2.1, 2.0);
  EXPECT_EQ(step.algorithm, "butterfly");
}

// Runs a class's trials, each candidate's finished with its time, and returns the choice.
PlanTrials::Step ChooseAfterTrials(PlanTrials& trials, const std::vector<std::string>& candidates,
                                   const std::vector<double>& modelled,
                                   const std::vector<double>& trial_seconds) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int asked = 0;  // The model is asked once per class, not on every call.
  auto model = [&] {
    ++asked;
    return modelled;
  };
  for (int i = 0; i < PlanTrials::kPasses * static_cast<int>(candidates.size()); ++i) {
    const PlanTrials::Step step = trials.Next("c", candidates, deadline, model);
    trials.Finished("c", step.trial, trial_seconds[i % candidates.size()]);
  }
  const PlanTrials::Step chosen = trials.Next("c", candidates, deadline, model);
  EXPECT_EQ(asked, 1);
  return chosen;
}

// Trials within the margin do not overrule a model that clearly prefers another candidate;
// trials that clearly disagree do, and so does a model without a clear preference.
TEST(PlanTrials, TheBandwidthModelDecidesWhereTrialsCannotTellTheCandidatesApart) {
  const std::vector<std::string> candidates = {"ring", "hierarchical", "butterfly"};
  {
    PlanTrials trials;
    const PlanTrials::Step step =
        ChooseAfterTrials(trials, candidates, {3.0, 1.0, 0}, {1.0, 1.05, 0.9});
    // The trials' winner is not modelled: the model cannot say that it disagrees.
    EXPECT_EQ(step.algorithm, "butterfly") << step.why;
  }
  {
    PlanTrials trials;
    const PlanTrials::Step step =
        ChooseAfterTrials(trials, candidates, {3.0, 1.0, 2.0}, {1.0, 1.05, 1.2});
    EXPECT_EQ(step.algorithm, "hierarchical") << step.why;
    EXPECT_TRUE(absl::StrContains(step.why, "the bandwidth model's (hierarchical 1 s, ring 3 s)"))
        << step.why;
    // It stays chosen, and its timed calls keep it.
    for (int i = 0; i < 3 * PlanTrials::kTimedEvery; ++i) {
      const PlanTrials::Step next = trials.Next("c", candidates, absl::Now());
      EXPECT_EQ(next.algorithm, "hierarchical");
      if (next.trial >= 0) trials.Finished("c", next.trial, 1.05);
    }
  }
  {
    PlanTrials trials;  // The trials show ring faster by more than the margin.
    EXPECT_EQ(ChooseAfterTrials(trials, candidates, {3.0, 1.0, 2.0}, {1.0, 1.2, 1.3}).algorithm,
              "ring");
  }
  {
    PlanTrials trials;  // The model barely prefers hierarchical: the trials decide.
    EXPECT_EQ(ChooseAfterTrials(trials, candidates, {1.2, 1.0, 2.0}, {1.0, 1.05, 1.3}).algorithm,
              "ring");
  }
  {
    PlanTrials trials;  // No model.
    EXPECT_EQ(ChooseAfterTrials(trials, candidates, {}, {1.0, 1.05, 1.3}).algorithm, "ring");
  }
}

TEST(PlanTrials, UnfinishedTrialsFallBackToTheRulesChoiceAtTheDeadline) {
  PlanTrials trials;
  const std::vector<std::string> candidates = {"ring", "butterfly"};
  for (int i = 0; i < PlanTrials::kPasses * 2; ++i) trials.Next("x", candidates, absl::Now());
  const PlanTrials::Step step = trials.Next("x", candidates, absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(step.algorithm, "ring");
  EXPECT_EQ(step.trial, -1);
}

}  // namespace
}  // namespace hmc
