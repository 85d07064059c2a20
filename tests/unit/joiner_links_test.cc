// WorldLinks: the links of a rank that joined after the probe, inferred alike on every rank from
// the probe and the table; compared with values written out by hand.
#include "collectives/joiner_links.h"

#include <gtest/gtest.h>

namespace hmc {
namespace {

// Four probed ranks: 0 and 1 in "us", 2 and 3 in "eu". Round trips: 1 ms inside a zone, 80 ms
// from us to rank 2 and 120 ms to rank 3; every rate distinct (10 * from + to + 100), so that
// the test sees whose rate a joiner got.
LinkProbeRecord FourRanks() {
  LinkProbeRecord probe;
  probe.ids = {0, 1, 2, 3};
  LinkMatrix& m = probe.links;
  m.size = 4;
  m.rtt_ms.assign(16, 0);
  m.mbit.assign(16, 0);
  const char* zone[] = {"us", "us", "eu", "eu"};
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      const bool same = std::string(zone[a]) == zone[b];
      const int eu = zone[a][0] == 'e' ? a : b;
      m.rtt_ms[a * 4 + b] = same ? 1.0 : (eu == 2 ? 80.0 : 120.0);
      m.mbit[a * 4 + b] = 10 * a + b + 100;
    }
  }
  m.auto_codec_bytes_per_s = 5e8;
  return probe;
}

// The four probed ranks and, as rank 4, a joiner in `zone` that measured `rtt_ms` (by id).
PeerTable WithJoiner(const std::string& zone, std::vector<double> rtt_ms, uint64_t basis) {
  PeerTable table;
  table.epoch = 3;
  table.world_size = 5;
  const char* zones[] = {"us", "us", "eu", "eu"};
  for (int r = 0; r < 4; ++r) table.peers.push_back(PeerEntry{.rank = r, .zone = zones[r]});
  table.peers.push_back(PeerEntry{.rank = 4, .zone = zone});
  table.peers[4].joined = JoinedLinks{.probe = basis, .rtt_ms = std::move(rtt_ms)};
  return table;
}

TEST(JoinerLinks, ProbeRecordRoundTripsAndRefusesTruncation) {
  const LinkProbeRecord probe = FourRanks();
  const std::string bytes = probe.Serialize();
  absl::StatusOr<LinkProbeRecord> back = LinkProbeRecord::Parse(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ids, probe.ids);
  EXPECT_EQ(back->links.rtt_ms, probe.links.rtt_ms);
  EXPECT_EQ(back->links.mbit, probe.links.mbit);
  EXPECT_EQ(back->Fingerprint(), probe.Fingerprint());
  EXPECT_NE(probe.Fingerprint(), 0u);
  EXPECT_EQ(LinkProbeRecord{}.Fingerprint(), 0u);
  EXPECT_FALSE(LinkProbeRecord::Parse(bytes.substr(0, bytes.size() - 3)).ok());
  EXPECT_FALSE(LinkProbeRecord::Parse(bytes + "x").ok());
}

// A replacement of dead rank 3 (its round trips look like 3's): its rates are 3's, its round
// trips its own; the probed links stay as they were.
TEST(JoinerLinks, AReplacementGetsTheRatesOfTheRankItsRoundTripsMatch) {
  const LinkProbeRecord probe = FourRanks();
  PeerTable table = WithJoiner("eu", {119, 121, 1.5, -1}, probe.Fingerprint());
  table.peers[3].alive = false;
  const LinkMatrix world = WorldLinks(probe, table);
  ASSERT_EQ(world.size, 5);
  for (int m : {0, 1, 2}) {
    EXPECT_EQ(world.rate(4, m), probe.links.rate(3, m)) << m;
    EXPECT_EQ(world.rate(m, 4), probe.links.rate(m, 3)) << m;
    EXPECT_EQ(world.rtt(m, 4), table.peers[4].joined.rtt_ms[m]);
    EXPECT_EQ(world.rtt(4, m), table.peers[4].joined.rtt_ms[m]);
  }
  EXPECT_EQ(world.rate(0, 2), probe.links.rate(0, 2));
  EXPECT_EQ(world.rtt(1, 2), probe.links.rtt(1, 2));
  EXPECT_EQ(world.auto_codec_bytes_per_s, 5e8);
}

// Its round trips look like rank 2's instead: 2 stands in, and the link between the joiner and
// rank 2 itself gets the fastest rate 2 has inside its zone (to 3).
TEST(JoinerLinks, ALinkToTheStandInItselfGetsTheZonesRate) {
  const LinkProbeRecord probe = FourRanks();
  const PeerTable table = WithJoiner("eu", {79, 81, 1.1, 0.9}, probe.Fingerprint());
  const LinkMatrix world = WorldLinks(probe, table);
  ASSERT_EQ(world.size, 5);
  EXPECT_EQ(world.rate(4, 0), probe.links.rate(2, 0));
  EXPECT_EQ(world.rate(4, 2), probe.links.rate(2, 3));
  EXPECT_EQ(world.rate(4, 3), probe.links.rate(2, 3));
  EXPECT_EQ(world.rtt(4, 3), 0.9);
}

TEST(JoinerLinks, LinksOnTheSameHostCarryNoRate) {
  const LinkProbeRecord probe = FourRanks();
  const PeerTable table = WithJoiner("eu", {119, 121, 1.5, 0}, probe.Fingerprint());
  const LinkMatrix world = WorldLinks(probe, table);
  ASSERT_EQ(world.size, 5);
  EXPECT_EQ(world.rate(4, 3), 0);
  EXPECT_EQ(world.rtt(3, 4), 0);
}

// Whatever cannot be inferred leaves the whole epoch unmeasured, on every rank alike.
TEST(JoinerLinks, UnknownLinksLeaveTheEpochUnmeasured) {
  const LinkProbeRecord probe = FourRanks();
  // It knew another probe, or none.
  EXPECT_FALSE(WorldLinks(probe, WithJoiner("eu", {119, 121, 1.5, 1}, 12345)).measured());
  EXPECT_FALSE(WorldLinks(probe, WithJoiner("eu", {119, 121, 1.5, 1}, 0)).measured());
  // Nobody was probed in its zone.
  EXPECT_FALSE(
      WorldLinks(probe, WithJoiner("asia", {200, 200, 150, 150}, probe.Fingerprint())).measured());
  // No probe at all.
  EXPECT_FALSE(WorldLinks(LinkProbeRecord{}, WithJoiner("eu", {1, 1, 1, 1}, 0)).measured());
  // A rank that left does not matter: only live members must be known.
  PeerTable gone = WithJoiner("asia", {200, 200, 150, 150}, 0);
  gone.peers[4].alive = false;
  EXPECT_TRUE(WorldLinks(probe, gone).measured());
}

}  // namespace
}  // namespace hmc
