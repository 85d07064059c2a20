// The stream probe's arithmetic: how many streams a measured link needs, and the receive rate
// with TCP's slow start left out.
#include "collectives/stream_probe.h"

#include <gtest/gtest.h>

namespace hmc {
namespace {

TEST(StreamsToReach, AsksForEnoughStreamsToCarryNinetyPercentOrAllWhereTheyScaled) {
  EXPECT_EQ(StreamsToReach(10, 80, 32), 8);      // Per-flow cap 10 on an 80 path: 72 / 10.
  EXPECT_EQ(StreamsToReach(21, 300, 32), 13);    // 270 / 21 = 12.9.
  EXPECT_EQ(StreamsToReach(21, 671, 32), 32);    // 32 streams carried 32 × 21 · 1.0: take all.
  EXPECT_EQ(StreamsToReach(2.3, 60.4, 32), 32);  // 82% of linear (the four continents × 0.02).
  EXPECT_EQ(StreamsToReach(500, 520, 32), 1);    // One stream already fills the link.
  EXPECT_EQ(StreamsToReach(10, 900, 16), 16);    // Never more than there are.
  EXPECT_EQ(StreamsToReach(0, 10, 16), 16);      // Nothing came through one stream.
}

TEST(RateMeter, LeavesSlowStartOut) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  RateMeter meter(start);
  // Slow start: 1 MB in the first second; then 1 MB every 100 ms (80 Mbit/s) for a second.
  meter.Arrived(start + absl::Seconds(1), 1000000);
  for (int i = 1; i <= 10; ++i)
    meter.Arrived(start + absl::Seconds(1) + absl::Milliseconds(100 * i), 1000000);
  EXPECT_NEAR(meter.Mbit(), 80.0, 0.5);
}

TEST(RateMeter, FallsBackToTheWholeWindowWithFewArrivals) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  RateMeter meter(start);
  meter.Arrived(start + absl::Seconds(2), 1000000);  // One arrival: 8 Mbit over 2 s.
  EXPECT_NEAR(meter.Mbit(), 4.0, 1e-9);
  EXPECT_EQ(RateMeter(start).Mbit(), 0);
}

TEST(StreamsByLinkClass, LongAndShortLinksEachTakeTheirClassesLargestChoice) {
  // Ring links: local (not probed), long, short, long.
  EXPECT_EQ(StreamsByLinkClass({0, 24, 2, 28}, {0.05, 103.2, 0.7, 272.0}), std::pair(28, 2));
  // A class without a probed ring link takes the group's largest choice.
  EXPECT_EQ(StreamsByLinkClass({10, 12}, {50.0, 60.0}), std::pair(12, 12));
  EXPECT_EQ(StreamsByLinkClass({0, 3}, {0.05, 0.7}), std::pair(3, 3));
}

}  // namespace
}  // namespace hmc
