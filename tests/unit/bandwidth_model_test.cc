// The bandwidth model the plan trials fall back on, against times worked out by hand.
#include "collectives/bandwidth_model.h"

#include <gtest/gtest.h>

#include "collectives/hierarchical.h"

namespace hmc {
namespace {

constexpr double kBytes = 64 << 20;
// Every rank's NIC, as the probe saw it: 1000 Mbit/s to its zone mate, 100 to each of two others.
constexpr double kNicBytesPerS = 1200e6 / 8;

// Two zones of two ranks: {0, 1} and {2, 3}.
LinkMatrix TwoZones() {
  LinkMatrix m{.size = 4, .rtt_ms = std::vector<double>(16), .mbit = std::vector<double>(16)};
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      const bool across = (a < 2) != (b < 2);
      m.rtt_ms[a * 4 + b] = across ? 100 : 1;
      m.mbit[a * 4 + b] = across ? 100 : 1000;
    }
  }
  return m;
}

const std::vector<int> kZones = {0, 0, 1, 1};
const std::vector<double> kEqual(4, 0.25);

// Each ring link is its sender's only busy one: it gets the NIC's whole measured total, which the
// probe's all-to-all split over three links.
TEST(BandwidthModel, RingLinksHaveTheirNicsToThemselvesAndPayEveryStepsLatency) {
  // Every ring link carries 2·3/4 of the vector; six steps at 50 ms (the longest, across zones).
  const double expected = 1.5 * kBytes / kNicBytesPerS + 6 * 0.050;
  EXPECT_NEAR(*ModelledAllReduceSeconds("ring", kBytes, kZones, kEqual, TwoZones()), expected,
              1e-9);
}

TEST(BandwidthModel, HierarchicalPaysItsPhasesOneAfterAnother) {
  // In the zone: half the vector each way (1 ms round trip); across: each holder sends the one
  // other holder its shard's other half and then its reduced half (2 × 1/4 of the vector), after
  // the holders' meeting: three latencies of 50 ms; the gather in the zone: each mate's half.
  // In every phase each rank sends on one link and receives on one: its NIC's whole total.
  const double in_zone = 0.5 * kBytes / kNicBytesPerS + 0.0005;
  const double across = 0.5 * kBytes / kNicBytesPerS + 3 * 0.050;
  EXPECT_NEAR(*ModelledAllReduceSeconds("hierarchical", kBytes, kZones, kEqual, TwoZones()),
              in_zone + across + in_zone, 1e-9);
}

// One-shot: every NIC sends and receives three whole vectors over its three links at once, in one
// latency (the argument check's, whose exchange its data rides on); nothing above kMaxEarlyBytes.
TEST(BandwidthModel, OneShotCarriesEveryVectorToEveryPeerInOneLatency) {
  constexpr size_t kShort = 400 << 10;
  EXPECT_NEAR(*ModelledAllReduceSeconds("one_shot", kShort, kZones, kEqual, TwoZones()),
              3.0 * kShort / kNicBytesPerS + 0.050, 1e-9);
  EXPECT_FALSE(ModelledAllReduceSeconds("one_shot", 2 << 20, kZones, kEqual, TwoZones()));
}

// The model and the algorithm share the layout: a zone of three and a zone of two, three shards;
// rank 3 holds shard 0 of the second zone, rank 4 shards 1 and 2.
TEST(ZoneLayout, ShardsAreHeldAsTheHierarchicalAllReduceCutsThem) {
  const ZoneLayout layout({5, 5, 5, 2, 2});
  ASSERT_EQ(layout.zones, (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(layout.shards, 3);
  EXPECT_EQ(layout.Holder(1, 0), 3);
  EXPECT_EQ(layout.Holder(1, 1), 4);
  EXPECT_EQ(layout.Holder(1, 2), 4);
  EXPECT_EQ(layout.Holder(0, 2), 2);
  EXPECT_EQ(layout.ZoneIndexOf(4), 1u);
}

// Every link busy: a rank's NIC carries the sum of what it sends each peer, its measured total
// (not the slowest of its links, whose share of it varies from one probe to the next).
TEST(BandwidthModel, ButterflyNicsCarryEveryLinksShares) {
  // Rank 0 sends rank 1 (0.4 + 0.4), rank 2 (0.4 + 0) and rank 3 (0.4 + 0.2) of the vector, and
  // receives as much: the busiest NIC.
  const std::vector<double> shares = {0.4, 0.4, 0.0, 0.2};
  const double expected = 1.8 * kBytes / kNicBytesPerS + 2 * 0.050;
  EXPECT_NEAR(*ModelledAllReduceSeconds("butterfly", kBytes, kZones, shares, TwoZones()), expected,
              1e-9);
}

TEST(BandwidthModel, LinksInsideAHostCountAsADataCentresAndNothingUnmeasuredIsGuessed) {
  LinkMatrix m = TwoZones();
  m.mbit[0 * 4 + 1] = 0;  // In one host: not measured, and no part of the NICs' totals.
  m.rtt_ms[0 * 4 + 1] = 0;
  // Ring link 0 -> 1 at 1 GB/s; the others still get their NICs' 1200 Mbit/s.
  EXPECT_NEAR(*ModelledAllReduceSeconds("ring", kBytes, kZones, kEqual, m),
              1.5 * kBytes / kNicBytesPerS + 6 * 0.050, 1e-9);
  // Rank 1 -> 0 in the host too: rank 1 sends 200 Mbit/s in all (all of it for 1 -> 2), rank 0
  // receives 200 (all of it from 3).
  m.mbit[1 * 4 + 0] = 0;
  m.rtt_ms[1 * 4 + 0] = 0;
  EXPECT_NEAR(*ModelledAllReduceSeconds("ring", kBytes, kZones, kEqual, m),
              1.5 * kBytes / (200e6 / 8) + 6 * 0.050, 1e-9);
  EXPECT_FALSE(ModelledAllReduceSeconds("ring", kBytes, kZones, kEqual, LinkMatrix{}).has_value());
  EXPECT_FALSE(
      ModelledAllReduceSeconds("one_shot", kBytes, kZones, kEqual, TwoZones()).has_value());
  EXPECT_FALSE(
      ModelledAllReduceSeconds("butterfly", kBytes, kZones, {0.5, 0.5}, TwoZones()).has_value());
}

}  // namespace
}  // namespace hmc
