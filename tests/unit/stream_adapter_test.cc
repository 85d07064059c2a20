// The stream adapter's climb, against links whose rate is a known function of the stream count.
#include "transports/tcp/stream_adapter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace hmc {
namespace {

// Feeds the climber `samples` samples from `rate` at whatever count it asks for; returns the
// count it asked for last.
int Climb(StreamClimber& climber, int start, const std::function<double(int)>& rate, int samples) {
  int streams = start;
  for (int i = 0; i < samples; ++i) streams = climber.Observe(streams, rate(streams));
  return streams;
}

// A climber over 32 connections: a baseline of two samples at `from` (rate `base`), which asks for
// every connection, then the top's first sample (dropped: cold streams) and two at `top`. Returns
// the count asked for after them.
int TryTheTop(StreamClimber& climber, int from, double base, double top) {
  climber.Observe(from, base);
  EXPECT_EQ(climber.Observe(from, base), 32);
  climber.Observe(32, 0);
  climber.Observe(32, top);
  return climber.Observe(32, top);
}

// A per-flow cap: each stream carries 10, the path 80.
double CappedPerFlow(int streams) { return std::min(10.0 * streams, 80.0); }

// From one stream every connection gains eightfold: the climb stays on them (it does not come
// down to the 8 that would hold the rate: on real paths "holds within 3%" is decided by noise).
TEST(StreamClimber, ClimbsFromOneStreamToEveryConnectionWhereThatGains) {
  StreamClimber climber(32);
  EXPECT_EQ(Climb(climber, 1, CappedPerFlow, 40), 32);
}

// From below the top, where every connection did not gain, fewer streams that hold the rate are
// kept.
TEST(StreamClimber, ComesDownFromTooManyStreamsWhereTheyHoldTheRate) {
  StreamClimber climber(32);
  const int settled = Climb(climber, 16, CappedPerFlow, 40);
  EXPECT_GE(settled, 8);
  EXPECT_LE(settled, 12);
}

// Shallow per-flow policers: past 6 streams their bursts drop packets and the rate falls.
double FallsPastSix(int streams) {
  const double past = 6.0 / streams;
  return streams <= 6 ? 10.0 * streams : 60.0 * past * past;
}

TEST(StreamClimber, FindsTheCountAboveWhichMoreStreamsLoseRate) {
  for (int start : {1, 4, 16, 32}) {
    StreamClimber climber(32);
    const int settled = Climb(climber, start, FallsPastSix, 40);
    EXPECT_GE(settled, 4) << "from " << start;
    EXPECT_LE(settled, 6) << "from " << start;
  }
}

TEST(StreamClimber, ANoisyFlatLinkNeverClimbs) {
  StreamClimber climber(32);
  int streams = 8;
  unsigned noise = 1;
  for (int i = 0; i < 200; ++i) {
    noise = noise * 1103515245 + 12345;
    streams = climber.Observe(streams, 100.0 * (1 + 0.02 * ((noise >> 16) % 100) / 100.0));
  }
  // A flat link: no count gains kGain over another, so the climb never moves up.
  EXPECT_LE(streams, 8);
}

// US+EU's shape: a policer caps each flow at 21 Mbit/s, the path carries 620. From the probe's 11
// the climb's first request is every connection, and it stays there: 21 carry a third less.
double TransatlanticPolicers(int streams) { return std::min(21.0 * streams, 620.0); }

TEST(StreamClimber, TriesEveryConnectionFirstAndKeepsThemWhereEachFlowIsCapped) {
  StreamClimber climber(32);
  climber.Observe(11, TransatlanticPolicers(11));
  ASSERT_EQ(climber.Observe(11, TransatlanticPolicers(11)), 32);
  EXPECT_EQ(Climb(climber, 32, TransatlanticPolicers, 40), 32);
}

// From 22 one step up is the top: where the top did not gain, the climb tries fewer instead of
// measuring the top again.
TEST(StreamClimber, DoesNotTryTheTopTwice) {
  StreamClimber climber(32);
  EXPECT_EQ(TryTheTop(climber, 22, 100, 100), 15);
}

TEST(StreamClimber, IgnoresSamplesSentBeforeTheSenderHeardTheRequest) {
  StreamClimber climber(32);
  int asked = climber.Observe(4, 40);
  asked = climber.Observe(4, 40);  // The baseline is taken; it asks for every connection.
  ASSERT_EQ(asked, 32);
  // A sample still over 4 streams must not count as the trial of 32.
  EXPECT_EQ(climber.Observe(4, 1000), 32);
  // The first over 32 is dropped: its new streams start cold.
  EXPECT_EQ(climber.Observe(32, 1), 32);
  EXPECT_EQ(climber.Observe(32, 60), 32);
  EXPECT_EQ(climber.Observe(32, 60), 32);  // 60 > 40 · kGain: it moves to 32 and stays.
}

// Every connection gained on the count the climb started from: the climb stays there, and its
// periodic re-checks keep it there where rates of one count are noisy (each re-check measures the
// top again and does not try fewer), as do a few samples below kDrop of the best (a ring's link
// stalls while its upstream does). kDropSamples in a row start a new climb from the top, which
// comes down where fewer streams gain kGain.
TEST(StreamClimber, StaysOnEveryConnectionWhereThatGained) {
  StreamClimber climber(32);
  ASSERT_EQ(TryTheTop(climber, 8, 100, 200), 32);
  // Three settled periods and their re-checks, with samples far below and far above the best,
  // and in each period one fewer than kDropSamples in a row below kDrop of it: never another count.
  constexpr int kPeriod = StreamClimber::kSettledSamples + StreamClimber::kTrialSamples;
  for (int i = 0; i < 3 * kPeriod; ++i) {
    const bool low = i % kPeriod >= 3 && i % kPeriod < 3 + StreamClimber::kDropSamples - 1;
    ASSERT_EQ(climber.Observe(32, low ? 50 : i % 2 == 0 ? 150 : 260), 32) << i;
  }
  // The path changes: a new climb, settled on every connection until its first re-check, which
  // tries fewer, and they now carry more.
  constexpr int kUntilFewer = StreamClimber::kDropSamples + kPeriod - 1;
  for (int i = 0; i < kUntilFewer; ++i) ASSERT_EQ(climber.Observe(32, 50), 32) << i;
  EXPECT_EQ(climber.Observe(32, 50), 21);
  climber.Observe(21, 60);
  EXPECT_EQ(climber.Observe(21, 60), 32);  // 21 gained: the top again, measured after it.
  climber.Observe(32, 0);                  // Dropped: cold streams.
  climber.Observe(32, 50);
  EXPECT_EQ(climber.Observe(32, 50), 14);  // 21 gained on both: it stands there and tries 14.
  climber.Observe(14, 60);
  EXPECT_EQ(climber.Observe(14, 60), 21);  // 14 did not gain: it settles on 21.
}

// A sender on every connection (where a long link starts): the climb settles there, and its first
// re-check tries fewer, which it keeps only where they gain kGain (a trial cannot tell close
// counts apart within kHold). Where each flow is capped, or fewer only hold the rate, it stays on
// the top, and every later re-check keeps it there.
TEST(StreamClimber, FromEveryConnectionComesDownOnlyWhereFewerGain) {
  for (const auto& rate : {std::function<double(int)>(TransatlanticPolicers),
                           std::function<double(int)>(CappedPerFlow)}) {
    StreamClimber climber(32);
    std::vector<int> asked;
    for (int i = 0, streams = 32; i < 4 * StreamClimber::kSettledSamples; ++i) {
      streams = climber.Observe(streams, rate(streams));
      if (asked.empty() || asked.back() != streams) asked.push_back(streams);
    }
    EXPECT_EQ(asked, (std::vector<int>{32, 21, 32}));
  }
}

// Past 16 streams the rate falls (their bursts overflow a shallow queue): from every connection
// the climb comes down to 21, the top measured again confirms it, and 14 does not gain.
TEST(StreamClimber, FromEveryConnectionComesDownWhereFewerGainOnBothSides) {
  const auto rate = [](int streams) {
    return streams <= 16 ? 50.0 * streams : 800.0 * std::sqrt(16.0 / streams);
  };
  StreamClimber climber(32);
  std::vector<int> asked;
  for (int i = 0, streams = 32; i < 4 * StreamClimber::kSettledSamples; ++i) {
    streams = climber.Observe(streams, rate(streams));
    if (asked.empty() || asked.back() != streams) asked.push_back(streams);
  }
  ASSERT_GE(asked.size(), 5u);
  EXPECT_EQ(std::vector<int>(asked.begin(), asked.begin() + 5),
            (std::vector<int>{32, 21, 32, 14, 21}));
  EXPECT_EQ(asked.back(), 21);  // Its re-checks try 32 and 14 again, and come back.
}

// Streams that warm up while the climb measures them: every trial reads 10% more than the one
// before it whatever the count. 21 streams, measured after the top, gain 10% on it; the top
// measured again after them gains back, and the climb stays there.
TEST(StreamClimber, FewerStreamsMeasuredOnWarmerStreamsDoNotWin) {
  StreamClimber climber(32);
  for (int i = 0; i < StreamClimber::kSettledSamples; ++i) ASSERT_EQ(climber.Observe(32, 50), 32);
  climber.Observe(32, 100);
  ASSERT_EQ(climber.Observe(32, 100), 21);
  climber.Observe(21, 110);
  ASSERT_EQ(climber.Observe(21, 110), 32);
  climber.Observe(32, 0);  // Dropped: cold streams.
  climber.Observe(32, 121);
  EXPECT_EQ(climber.Observe(32, 121), 32);
  for (int i = 0; i < 2 * StreamClimber::kSettledSamples; ++i) {
    ASSERT_EQ(climber.Observe(32, 121), 32) << i;
  }
}

// A sender may have many messages queued over the old count when a request arrives: however many
// samples of it follow, the climb goes on.
TEST(StreamClimber, ALongTailOfTheOldCountDoesNotRestartTheClimb) {
  StreamClimber climber(32);
  climber.Observe(10, 100);
  ASSERT_EQ(climber.Observe(10, 100), 32);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(climber.Observe(10, 100), 32);
  climber.Observe(32, 0);  // Dropped: cold streams.
  climber.Observe(32, 100);
  ASSERT_EQ(climber.Observe(32, 100), 15);  // No gain at the top: it climbs from 10.
  for (int i = 0; i < 10; ++i) ASSERT_EQ(climber.Observe(10, 100), 15);  // 10: where it stands.
  for (int i = 0; i < 10; ++i) ASSERT_EQ(climber.Observe(32, 100), 15);  // 32: asked before.
  climber.Observe(15, 0);
  climber.Observe(15, 150);
  ASSERT_EQ(climber.Observe(15, 150), 23);  // Moved to 15; 23 under test.
  for (int i = 0; i < 10; ++i) ASSERT_EQ(climber.Observe(15, 150), 23);
  climber.Observe(23, 0);
  climber.Observe(23, 150);
  ASSERT_EQ(climber.Observe(23, 150), 15);  // No gain at 23: it settles on 15.
  for (int i = 0; i < 10; ++i) ASSERT_EQ(climber.Observe(23, 150), 15);  // 23: asked before.
}

TEST(StreamClimber, StartsAgainFromACountTheSenderChoseItself) {
  StreamClimber climber(32);
  climber.Observe(4, 40);
  ASSERT_EQ(climber.Observe(4, 40), 32);
  // The sender keeps sending over 12 (a new probe's choice): after a few samples the climb
  // starts from 12, and tries the top from there.
  int asked = 0;
  for (int i = 0; i < StreamClimber::kForeignSamples + 1; ++i) asked = climber.Observe(12, 120);
  ASSERT_EQ(asked, 32);
  climber.Observe(32, 0);
  climber.Observe(32, 120);
  EXPECT_EQ(climber.Observe(32, 120), 18);  // No gain at the top: one step up from 12.
}

TEST(StreamClimber, ARateThatFallsWhileSettledStartsANewClimb) {
  StreamClimber climber(32);
  std::function<double(int)> rate = FallsPastSix;
  const int settled = Climb(climber, 1, rate, 40);
  ASSERT_LT(settled, 32);
  // The path's per-flow cap halves: the settled count now carries half, and more streams help.
  rate = [](int streams) { return std::min(5.0 * streams, 80.0); };
  EXPECT_GT(Climb(climber, settled, rate, 40), settled);
}

TEST(SizeClass, FactorsOfFourFromAQuarterMebibyte) {
  EXPECT_EQ(SizeClassOf(64 << 10), -1);
  EXPECT_EQ(SizeClassOf((256 << 10) - 1), -1);
  EXPECT_EQ(SizeClassOf(256 << 10), 0);
  EXPECT_EQ(SizeClassOf((1 << 20) - 1), 0);
  EXPECT_EQ(SizeClassOf(1 << 20), 1);
  EXPECT_EQ(SizeClassOf(2 << 20), 1);
  EXPECT_EQ(SizeClassOf(4 << 20), 2);
  EXPECT_EQ(SizeClassOf(16 << 20), 3);
  EXPECT_EQ(SizeClassOf(uint64_t{1} << 40), 3);
}

TEST(ArrivalSampler, TimesOnlyMessagesThatArrivedBehindAnother) {
  ArrivalSampler sampler;
  const absl::Time t0 = absl::UnixEpoch();
  auto at = [&](int ms) { return t0 + absl::Milliseconds(ms); };
  auto add = [&](int from, int to) { return sampler.Add(at(from), at(to), 1000000, 4); };
  // A run of five 1 MB messages: the first found the link idle and does not count; the others
  // count from the previous one's end to their own (50 + 50 + 60 ms so far).
  EXPECT_FALSE(add(0, 100).has_value());
  EXPECT_FALSE(add(50, 150).has_value());
  EXPECT_FALSE(add(120, 200).has_value());
  EXPECT_FALSE(add(190, 260).has_value());
  // Idle, then a message alone: not counted, and the gap before it neither.
  EXPECT_FALSE(add(1000, 1100).has_value());
  // One behind it (70 ms) completes the sample: 4 MB over 230 ms.
  const std::optional<ArrivalSampler::Sample> sample = add(1050, 1170);
  ASSERT_TRUE(sample.has_value());
  EXPECT_EQ(sample->streams, 4);
  EXPECT_NEAR(sample->bytes_per_second, 4e6 / 0.23, 1);
}

TEST(ArrivalSampler, AChangeOfStreamsStartsANewSample) {
  ArrivalSampler sampler;
  const absl::Time t0 = absl::UnixEpoch();
  auto at = [&](int ms) { return t0 + absl::Milliseconds(ms); };
  // Back to back: every message after the first arrived behind another.
  for (int i = 0; i < ArrivalSampler::kMessagesPerSample; ++i) {
    EXPECT_FALSE(sampler.Add(at(100 * i), at(100 * i + 110), 1000, 4).has_value());
  }
  // Its first message over 8 streams does not complete the sample of 4.
  EXPECT_FALSE(sampler.Add(at(400), at(510), 1000, 8).has_value());
}

// On a long link a sample spans at least kRoundTripsPerSample round trips: four messages arriving
// back to back over 160 ms of a 100 ms link are not enough; the fifth brings the time to 200 ms
// and closes the sample with all five.
TEST(ArrivalSampler, ASampleSpansAtLeastTwoRoundTripsOfTheLink) {
  static_assert(ArrivalSampler::kMessagesPerSample == 4 &&
                ArrivalSampler::kRoundTripsPerSample == 2);
  ArrivalSampler sampler;
  const absl::Time t0 = absl::UnixEpoch();
  auto add = [&](int from, int to) {
    return sampler.Add(t0 + absl::Milliseconds(from), t0 + absl::Milliseconds(to), 1000000, 4,
                       absl::Milliseconds(100));
  };
  EXPECT_FALSE(add(0, 50).has_value());  // Opens the run.
  EXPECT_FALSE(add(40, 90).has_value());
  EXPECT_FALSE(add(80, 130).has_value());
  EXPECT_FALSE(add(120, 170).has_value());
  EXPECT_FALSE(add(160, 210).has_value());  // Four counted, 160 ms: shorter than 2 round trips.
  const std::optional<ArrivalSampler::Sample> sample = add(200, 250);
  ASSERT_TRUE(sample.has_value());
  EXPECT_NEAR(sample->bytes_per_second, 5e6 / 0.2, 1);
}

TEST(StreamAdapter, AsksTheSenderOnlyWhenAClassWantsAnotherCount) {
  StreamAdapter adapter(32);
  const absl::Time t0 = absl::UnixEpoch();
  std::optional<StreamAdapter::Request> asked;
  int requests = 0;
  // 2 MiB messages over 4 streams, back to back, 10 ms each: the first opens the run, then a
  // baseline of two samples and a request for every connection.
  for (int i = 0; i < 2 * ArrivalSampler::kMessagesPerSample + 1; ++i) {
    asked = adapter.Arrived(t0 + absl::Milliseconds(10 * i), t0 + absl::Milliseconds(10 * i + 11),
                            2 << 20, 4, absl::ZeroDuration());
    if (asked.has_value()) ++requests;
  }
  ASSERT_TRUE(asked.has_value());
  EXPECT_EQ(requests, 1);
  EXPECT_EQ(asked->size_class, 1);
  EXPECT_EQ(asked->streams, 32);
  // Messages below the adapted sizes never ask.
  for (int i = 0; i < 40; ++i) {
    EXPECT_FALSE(adapter.Arrived(t0, t0 + absl::Milliseconds(1), 64 << 10, 4, absl::ZeroDuration())
                     .has_value());
  }
}

}  // namespace
}  // namespace hmc
