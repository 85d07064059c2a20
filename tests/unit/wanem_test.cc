// The WAN emulator's topology format and link model, in virtual time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "perf/wanem/forwarder.h"
#include "perf/wanem/link_model.h"
#include "perf/wanem/topology.h"

namespace hmc::wanem {
namespace {

constexpr char kUsEu[] = R"(
# two regions, two hosts each
scale 1
queue 1MiB
region us cloud=gc
region eu cloud=gc nic=10Gbit
host us-0 region=us
host us-1 region=us nic=1Gbit
host eu-0 region=eu
path us us rtt=1ms capacity=6894Mbit
path eu eu rtt=1ms capacity=6818Mbit
path us eu rtt=103.2ms capacity=6198Mbit flow=211Mbit loss=1% jitter=2ms
)";

TEST(Topology, ParsesRegionsHostsAndSymmetricPaths) {
  auto t = ParseTopology(kUsEu, "us-eu.topo");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->queue_bytes, 1u << 20);
  ASSERT_EQ(t->hosts.size(), 3u);
  auto there = t->PathBetween(*t->FindHost("us-0"), *t->FindHost("eu-0"));
  auto back = t->PathBetween(*t->FindHost("eu-0"), *t->FindHost("us-1"));
  ASSERT_TRUE(there.ok() && back.ok());
  EXPECT_EQ(there->rtt, absl::Microseconds(103200));
  EXPECT_DOUBLE_EQ(there->flow_bps, 211e6);
  EXPECT_DOUBLE_EQ(back->capacity_bps, 6198e6);
  EXPECT_DOUBLE_EQ(there->loss, 0.01);
  EXPECT_EQ(there->jitter, absl::Milliseconds(2));
  EXPECT_DOUBLE_EQ(t->NicBps(*t->FindHost("us-1")), 1e9);   // Host's own NIC.
  EXPECT_DOUBLE_EQ(t->NicBps(*t->FindHost("eu-0")), 10e9);  // The region's.
  EXPECT_DOUBLE_EQ(t->NicBps(*t->FindHost("us-0")), 0);     // Unlimited.
}

TEST(Topology, ScaleAppliesToRatesNotDelays) {
  auto t = ParseTopology(std::string(kUsEu) + "scale 0.1\n", "x");
  ASSERT_TRUE(t.ok());
  auto path = t->PathBetween(*t->FindHost("us-0"), *t->FindHost("eu-0"));
  EXPECT_DOUBLE_EQ(path->flow_bps, 21.1e6);
  EXPECT_EQ(path->rtt, absl::Microseconds(103200));
}

TEST(Topology, ErrorsNameTheFileLineAndProblem) {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"region a\nhost h region=b\n", "x.topo:2: host h needs region=NAME"},
      {"region a\nhost h region=a\npath a a rtt=1ms\n",
       "x.topo:3: a path needs rtt= and capacity="},
      {"region a\nhost h region=a\npath a a rtt=1 capacity=1Mbit\n", "x.topo:3: time '1'"},
      {"region a\nhost h region=a\npath a a rtt=1ms capacity=5MB\n", "rate '5MB'"},
      {"region a\nregion a\n", "x.topo:2: region a is defined twice"},
      {"region a\nhost h region=a speed=1\n", "x.topo:2: unknown attribute 'speed'"},
      {"bogus 1\n", "x.topo:1: unknown statement 'bogus'"},
      {"region a\nhost h region=a\npath a a rtt=1ms capacity=1Mbit loss=7\n", "loss '7'"},
      {"region a\n", "the topology has no hosts"},
  };
  for (const Case& c : cases) {
    auto t = ParseTopology(c.text, "x.topo");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(t.status().message(), c.expected)) << t.status();
  }
}

TEST(RateStage, DeliversAtItsRateAndDropsBeyondItsQueue) {
  RateStage stage(8e6, 10000);  // 1 MB/s, 10 kB of queue.
  const absl::Time t0 = absl::UnixEpoch();
  // 1000-byte packets arriving all at once: ten fit (one in service, nine waiting), then drops.
  int admitted = 0;
  absl::Time last;
  for (int i = 0; i < 20; ++i) {
    if (auto done = stage.Pass(t0, 1000)) {
      ++admitted;
      last = *done;
    }
  }
  EXPECT_EQ(admitted, 10);
  EXPECT_EQ(last, t0 + absl::Milliseconds(10));
  // Paced at the rate, nothing is dropped and each leaves 1 ms after the previous.
  RateStage paced(8e6, 2000);
  for (int i = 0; i < 100; ++i) {
    auto done = paced.Pass(t0 + absl::Milliseconds(i), 1000);
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(*done, t0 + absl::Milliseconds(i + 1));
  }
}

// Offers `flows` streams of 1500-byte packets from us-0 to eu-0, each at `offered_bps`, for
// `seconds`, and returns the delivered rate in bit/s (what the shapers let through in time).
double Throughput(LinkModel& model, int flows, double offered_bps, double seconds) {
  const absl::Time t0 = absl::UnixEpoch();
  const uint64_t packet = 1500;
  const absl::Duration interval = absl::Seconds(packet * 8 / offered_bps);
  const absl::Time end = t0 + absl::Seconds(seconds);
  const absl::Duration one_way = absl::Microseconds(51600);
  double delivered = 0;
  std::vector<LinkModel::Outcome> outcomes;
  auto count = [&] {
    for (const LinkModel::Outcome& o : outcomes) {
      if (!o.dropped && o.release - one_way <= end) delivered += packet * 8;
    }
    outcomes.clear();
  };
  for (absl::Time t = t0; t < end; t += interval) {
    model.Advance(t, &outcomes);
    count();
    for (int f = 0; f < flows; ++f) model.Admit(0, 2, static_cast<uint64_t>(f), packet, t);
  }
  model.Advance(end + absl::Seconds(10), &outcomes);
  count();
  return delivered / seconds;
}

TEST(LinkModel, OneFlowIsCappedAndManyFlowsFillThePath) {
  const std::string lossless =
      "region us\nregion eu\nhost us-0 region=us\nhost us-1 region=us\n"
      "host eu-0 region=eu\npath us us rtt=1ms capacity=10Gbit\n"
      "path eu eu rtt=1ms capacity=10Gbit\n"
      "path us eu rtt=103.2ms capacity=600Mbit flow=211Mbit\n";
  auto topology = ParseTopology(lossless, "x");
  ASSERT_TRUE(topology.ok()) << topology.status();
  auto one = LinkModel::Create(*topology, 1);
  ASSERT_TRUE(one.ok());
  // One stream offered 400 Mbit/s gets its 211 Mbit/s cap; eight get the 600 Mbit/s path.
  EXPECT_NEAR(Throughput(*one, 1, 400e6, 2), 211e6, 211e6 * 0.02);
  auto many = LinkModel::Create(*topology, 1);
  EXPECT_NEAR(Throughput(*many, 8, 400e6, 2), 600e6, 600e6 * 0.02);
  // Under the cap, everything offered arrives.
  auto light = LinkModel::Create(*topology, 1);
  EXPECT_NEAR(Throughput(*light, 2, 100e6, 2), 200e6, 200e6 * 0.02);
}

// hmc-wanem cut/degrade/heal while the emulator runs: a cut path delivers nothing, a degraded
// one caps each flow at the rate given, and lifting the overrides restores the topology's path.
TEST(LinkModel, OverridesCutDegradeAndHealAPath) {
  auto topology = ParseTopology(
      "region us\nregion eu\nhost us-0 region=us\nhost us-1 region=us\n"
      "host eu-0 region=eu\npath us us rtt=1ms capacity=10Gbit\n"
      "path eu eu rtt=1ms capacity=10Gbit\n"
      "path us eu rtt=103.2ms capacity=600Mbit flow=211Mbit\n",
      "x");
  ASSERT_TRUE(topology.ok()) << topology.status();
  auto cut = LinkModel::Create(*topology, 1);
  cut->Override(0, 2, 1.0, 0);
  EXPECT_EQ(Throughput(*cut, 1, 100e6, 1), 0);
  EXPECT_GT(cut->counters(0, 2).random_losses, 0u);
  auto degraded = LinkModel::Create(*topology, 1);
  degraded->Override(0, 2, -1, 50e6);
  EXPECT_NEAR(Throughput(*degraded, 1, 400e6, 2), 50e6, 50e6 * 0.03);
  auto healed = LinkModel::Create(*topology, 1);
  healed->Override(0, 2, 1.0, 10e6);
  healed->ClearOverrides();
  EXPECT_NEAR(Throughput(*healed, 1, 400e6, 2), 211e6, 211e6 * 0.02);
}

// A flow queueing behind its cap must not delay or drop another flow's packets on the shared
// path: each stage sees its packets in time order.
TEST(LinkModel, ABackloggedFlowDoesNotStarveAnother) {
  auto topology = ParseTopology(
      "region us\nregion eu\nhost u region=us\nhost e region=eu\n"
      "path us us rtt=1ms capacity=10Gbit\npath eu eu rtt=1ms capacity=10Gbit\n"
      "path us eu rtt=100ms capacity=1Gbit flow=200Mbit\n",
      "x");
  ASSERT_TRUE(topology.ok());
  auto model = LinkModel::Create(*topology, 1);
  ASSERT_TRUE(model.ok());
  const absl::Time t0 = absl::UnixEpoch();
  std::map<uint64_t, int> flow_of;
  uint64_t delivered[2] = {0, 0};
  std::vector<LinkModel::Outcome> outcomes;
  auto count = [&] {
    for (const LinkModel::Outcome& o : outcomes) {
      if (!o.dropped) delivered[flow_of[o.id]] += 1500;
    }
    outcomes.clear();
  };
  // Flow 0 offers 400 Mbit/s against its 200 Mbit/s cap; flow 1 offers 48 Mbit/s.
  for (int i = 0; i < 40000; ++i) {
    const absl::Time t = t0 + absl::Microseconds(30 * i);
    model->Advance(t, &outcomes);
    count();
    flow_of[model->Admit(0, 1, 0, 1500, t)] = 0;
    if (i % 8 == 0) flow_of[model->Admit(0, 1, 1, 1500, t)] = 1;
  }
  model->Advance(t0 + absl::Seconds(100), &outcomes);
  count();
  EXPECT_EQ(delivered[1], 5000u * 1500);   // Every packet of the light flow arrives.
  EXPECT_LT(delivered[0], 40000u * 1500);  // The heavy flow loses what exceeds its queue.
}

// A policed flow cap delays nothing: a burst passes at once up to its bucket (one
// bandwidth-delay product, at least 64 KiB) and the rest is dropped; a shaped cap queues the same
// burst and lets it out at its rate. Over time both carry the cap.
TEST(LinkModel, APolicedFlowCapDropsWhatExceedsItsBucketAndQueuesNothing) {
  const std::string paths =
      "region us\nregion eu\nhost u region=us\nhost e region=eu\n"
      "path us us rtt=1ms capacity=10Gbit\npath eu eu rtt=1ms capacity=10Gbit\n"
      "path us eu rtt=100ms capacity=1Gbit flow=1Mbit";
  auto shaped = ParseTopology(paths + "\n", "x");
  auto policed = ParseTopology(paths + " police\n", "x");
  ASSERT_TRUE(shaped.ok() && policed.ok());
  const absl::Time t0 = absl::UnixEpoch();
  auto burst = [&](const Topology& topology) {
    auto model = LinkModel::Create(topology, 1, 1500);
    EXPECT_TRUE(model.ok());
    for (int i = 0; i < 60; ++i) model->Admit(0, 1, 7, 1500, t0);  // 90 000 bytes.
    std::vector<LinkModel::Outcome> outcomes;
    model->Advance(t0 + absl::Seconds(100), &outcomes);
    return outcomes;
  };
  int dropped = 0;
  for (const LinkModel::Outcome& o : burst(*policed)) {
    if (o.dropped) {
      ++dropped;
    } else {
      EXPECT_LT(o.release, t0 + absl::Milliseconds(52));  // Half the RTT and the NICs: no queue.
    }
  }
  EXPECT_EQ(dropped, 60 - (64 << 10) / 1500);
  absl::Time last = t0;
  for (const LinkModel::Outcome& o : burst(*shaped)) {
    if (!o.dropped) last = std::max(last, o.release);
  }
  EXPECT_GT(last, t0 + absl::Milliseconds(400));  // 43 packets at 1 Mbit/s.
  auto topology = ParseTopology(
      "region us\nregion eu\nhost us-0 region=us\nhost us-1 region=us\nhost eu-0 region=eu\n"
      "path us us rtt=1ms capacity=10Gbit\npath eu eu rtt=1ms capacity=10Gbit\n"
      "path us eu rtt=103.2ms capacity=600Mbit flow=211Mbit police\n",
      "x");
  ASSERT_TRUE(topology.ok());
  auto model = LinkModel::Create(*topology, 1);
  // Over 2 s: the cap, and the full bucket it started with (one round trip of the cap).
  const double expected = 211e6 * (1 + 0.1032 / 2);
  EXPECT_NEAR(Throughput(*model, 1, 400e6, 2), expected, expected * 0.02);
}

// A slow scaled path's bandwidth-delay product may be a few jumbo frames; its flow queue still
// takes a TCP initial window (10 packets) at once, at the emulated MTU.
TEST(LinkModel, AFlowQueueTakesAnInitialWindowOfFullSizePackets) {
  auto topology = ParseTopology(
      "region us\nregion eu\nhost u region=us\nhost e region=eu\n"
      "path us us rtt=1ms capacity=10Gbit\npath eu eu rtt=1ms capacity=10Gbit\n"
      "path us eu rtt=100ms capacity=1Gbit flow=1Mbit\n",
      "x");
  ASSERT_TRUE(topology.ok());
  auto dropped_of_burst = [&](int mtu) {
    auto model = LinkModel::Create(*topology, 1, mtu);
    EXPECT_TRUE(model.ok());
    const absl::Time t0 = absl::UnixEpoch();
    for (int i = 0; i < 10; ++i) model->Admit(0, 1, 7, static_cast<uint64_t>(mtu), t0);
    std::vector<LinkModel::Outcome> outcomes;
    model->Advance(t0 + absl::Seconds(100), &outcomes);
    EXPECT_EQ(outcomes.size(), 10u);
    return std::count_if(outcomes.begin(), outcomes.end(),
                         [](const LinkModel::Outcome& o) { return o.dropped; });
  };
  EXPECT_EQ(dropped_of_burst(9000), 0);
  EXPECT_EQ(dropped_of_burst(1500), 0);
  // Beyond the queue (16 packets here), the tail is dropped.
  auto model = LinkModel::Create(*topology, 1, 9000);
  ASSERT_TRUE(model.ok());
  for (int i = 0; i < 20; ++i) model->Admit(0, 1, 7, 9000, absl::UnixEpoch());
  std::vector<LinkModel::Outcome> outcomes;
  model->Advance(absl::UnixEpoch() + absl::Seconds(100), &outcomes);
  EXPECT_GT(std::count_if(outcomes.begin(), outcomes.end(),
                          [](const LinkModel::Outcome& o) { return o.dropped; }),
            0);
}

TEST(LinkModel, DelayLossAndNoReordering) {
  auto topology = ParseTopology(kUsEu, "x");
  ASSERT_TRUE(topology.ok());
  auto model = LinkModel::Create(*topology, 42);
  ASSERT_TRUE(model.ok());
  const absl::Time t0 = absl::UnixEpoch();
  absl::Time previous = absl::InfinitePast();
  int delivered = 0;
  std::map<uint64_t, absl::Time> sent_at;
  std::vector<LinkModel::Outcome> outcomes;
  auto check = [&] {
    for (const LinkModel::Outcome& o : outcomes) {
      ASSERT_FALSE(o.dropped);
      ++delivered;
      const absl::Duration latency = o.release - sent_at[o.id];
      EXPECT_GE(latency, absl::Microseconds(51600));
      EXPECT_LE(latency, absl::Microseconds(51600 + 2000 + 100));
      EXPECT_GE(o.release, previous);  // Jitter never reorders.
      previous = o.release;
    }
    outcomes.clear();
  };
  for (int i = 0; i < 20000; ++i) {
    // Slow enough for no queueing: 1500 B every 100 us is 120 Mbit/s, under the 211 Mbit/s cap.
    const absl::Time sent = t0 + absl::Microseconds(100 * i);
    model->Advance(sent, &outcomes);
    check();
    if (const uint64_t id = model->Admit(0, 2, 7, 1500, sent); id != 0) sent_at[id] = sent;
  }
  model->Advance(t0 + absl::Seconds(100), &outcomes);
  check();
  const auto& c = model->counters(0, 2);
  EXPECT_EQ(c.packets, 20000u);
  EXPECT_EQ(c.queue_drops, 0u);
  // 1% loss: 200 expected; a seeded generator, so this is deterministic, and far from the bounds.
  EXPECT_GT(c.random_losses, 120u);
  EXPECT_LT(c.random_losses, 280u);
  EXPECT_EQ(delivered + static_cast<int>(c.random_losses), 20000);
}

TEST(LinkModel, MissingPathIsAnError) {
  auto topology = ParseTopology(
      "region a\nregion b\nhost x region=a\nhost y region=b\n"
      "path a a rtt=1ms capacity=1Gbit\n",
      "x");
  ASSERT_TRUE(topology.ok());
  auto model = LinkModel::Create(*topology, 1);
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(
      absl::StrContains(model.status().message(), "no path from region a (host x) to region b"))
      << model.status();
}

}  // namespace
}  // namespace hmc::wanem

namespace hmc::wanem {
namespace {

// Every shipped topology parses and defines a path between every pair of its hosts.
TEST(Topology, ShippedTopologiesAreComplete) {
  for (const std::string name :
       {"one-zone", "us-eu", "four-continents", "multicloud-us", "hybrid", "hybrid-slow-peer"}) {
    auto t = LoadTopology(std::string(HMC_SOURCE_DIR "/perf/topologies/") + name + ".topo");
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_TRUE(LinkModel::Create(*t, 1).ok()) << name << ": " << LinkModel::Create(*t, 1).status();
    if (name == "one-zone") continue;
    // Every WAN topology also ships policed: the same paths, each flow cap a policer.
    auto policed =
        LoadTopology(std::string(HMC_SOURCE_DIR "/perf/topologies/") + name + "-policed.topo");
    ASSERT_TRUE(policed.ok()) << name << "-policed: " << policed.status();
    ASSERT_EQ(policed->hosts.size(), t->hosts.size());
    const Host& first = t->hosts.front();
    const Host& last = t->hosts.back();
    EXPECT_TRUE(policed->PathBetween(first, last)->police);
    EXPECT_FALSE(t->PathBetween(first, last)->police);
    EXPECT_EQ(policed->PathBetween(first, last)->flow_bps, t->PathBetween(first, last)->flow_bps);
  }
}

TEST(Topology, IncludesComeFromFilesOnlyAndNestBoundedly) {
  const std::string dir = testing::TempDir();
  std::ofstream(dir + "/base.topo")
      << "region a\nhost a-0 region=a\npath a a rtt=1ms capacity=1Gbit\n";
  std::ofstream(dir + "/policed.topo") << "include base.topo\npolice\n";
  std::ofstream(dir + "/loop.topo") << "include loop.topo\n";
  auto policed = LoadTopology(dir + "/policed.topo");
  ASSERT_TRUE(policed.ok()) << policed.status();
  EXPECT_TRUE(policed->police);
  EXPECT_EQ(policed->hosts.size(), 1u);
  auto loop = LoadTopology(dir + "/loop.topo");
  EXPECT_TRUE(absl::StrContains(loop.status().message(), "includes nest deeper than 4"))
      << loop.status();
  auto text = ParseTopology("include base.topo\n", "given");
  EXPECT_TRUE(
      absl::StrContains(text.status().message(), "given:1: include is only allowed in files"))
      << text.status();
}

}  // namespace
}  // namespace hmc::wanem

namespace hmc::wanem {
namespace {

TEST(Forwarder, FlowsAreFiveTuplesAndAddressesMapToHosts) {
  // IPv4 TCP 10.201.0.1:44566 -> 10.201.0.3:5201.
  uint8_t a[40] = {0x45, 0,   0, 40, 0,  0,   0, 0, 64,   6,    0,    0,
                   10,   201, 0, 1,  10, 201, 0, 3, 0xae, 0x16, 0x14, 0x51};
  uint8_t b[40];
  std::memcpy(b, a, sizeof(a));
  b[21] ^= 1;  // Another source port: another flow.
  EXPECT_NE(FlowOf(a, sizeof(a)), FlowOf(b, sizeof(b)));
  EXPECT_EQ(FlowOf(a, sizeof(a)), FlowOf(a, sizeof(a)));
  uint32_t address;
  std::memcpy(&address, a + 16, 4);
  EXPECT_EQ(HostIndexOf(address), 2);
  EXPECT_EQ(HostAddress(2), "10.201.0.3");
  EXPECT_EQ(HostAddress(251), "10.201.1.2");
  const uint8_t second_block[4] = {10, 201, 1, 2}, outside[4] = {10, 202, 0, 1};
  std::memcpy(&address, second_block, 4);
  EXPECT_EQ(HostIndexOf(address), 251);
  std::memcpy(&address, outside, 4);
  EXPECT_EQ(HostIndexOf(address), -1);
}

}  // namespace
}  // namespace hmc::wanem
