// hmc-wanem end to end: bring up the US+EU topology (namespaces, TUN devices, the emulator
// process), run four hmc ranks on its emulated hosts, check the traffic crossed the emulated
// links, and tear everything down. Needs root and /dev/net/tun; skips without them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "launcher/local_group.h"
#include "launcher/process.h"
#include "tests/testing/command.h"

namespace hmc {
namespace {

using testing_util::ReadFile;
using testing_util::ReadFileWithoutLogLines;

int RunWanem(const std::vector<std::string>& args, const std::string& output = "") {
  std::vector<std::string> argv = {HMC_WANEM_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = Process::Spawn(argv, {}, {.output_path = output});
  if (!p.ok()) return -1;
  auto code = p->Wait(absl::Now() + absl::Seconds(60));
  return code.ok() ? *code : -1;
}

TEST(Wanem, RejectsABadTopologyNamingTheLine) {
  const std::string topology = testing::TempDir() + "/bad.topo";
  std::ofstream(topology) << "region us\nhost a region=us\npath us us rtt=5 capacity=1Gbit\n";
  const std::string output = testing::TempDir() + "/bad.out";
  EXPECT_EQ(RunWanem({"up", topology, "--prefix=hwbad"}, output), 1);
  EXPECT_TRUE(absl::StrContains(ReadFile(output), "bad.topo:3: time '5'")) << ReadFile(output);
}

class WanemUp : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || access("/dev/net/tun", R_OK | W_OK) != 0) {
      GTEST_SKIP() << "needs root and /dev/net/tun";
    }
    prefix_ = absl::StrCat("hw", getpid() % 100000);
  }
  void Up(const std::string& topology, int mtu = 1500) {
    const std::string output = testing::TempDir() + "/up.out";
    ASSERT_EQ(
        RunWanem({"up", topology, "--prefix=" + prefix_, absl::StrCat("--mtu=", mtu)}, output), 0)
        << ReadFile(output);
    up_ = true;
  }
  // Starts COMMAND on an emulated host with the group's token.
  void Exec(const std::string& host, std::vector<std::string> command,
            const std::string& output = "") {
    std::vector<std::string> argv = {
        HMC_WANEM_PATH, "exec", host, "--prefix=" + prefix_, "--", "env", "HMC_TOKEN=" + token_};
    argv.insert(argv.end(), command.begin(), command.end());
    auto p = Process::Spawn(argv, {}, {.output_path = output});
    ASSERT_TRUE(p.ok()) << p.status();
    processes_.push_back(std::move(*p));
  }
  void ExpectEveryProcessSucceeds() {
    for (size_t i = 0; i < processes_.size(); ++i) {
      auto code = processes_[i].Wait(absl::Now() + absl::Seconds(120));
      ASSERT_TRUE(code.ok()) << "process " << i << " did not finish";
      EXPECT_EQ(*code, 0) << "process " << i;
    }
  }
  void TearDown() override {
    if (!up_) return;
    EXPECT_EQ(RunWanem({"down", "--prefix=" + prefix_}), 0);
    // Nothing of this prefix is left behind.
    const std::string list = testing::TempDir() + "/netns.out";
    auto p = Process::Spawn({"ip", "netns", "list"}, {}, {.output_path = list});
    ASSERT_TRUE(p.ok());
    p->Wait(absl::Now() + absl::Seconds(10)).IgnoreError();
    EXPECT_FALSE(absl::StrContains(ReadFile(list), prefix_ + "-")) << ReadFile(list);
  }

  std::string prefix_;
  bool up_ = false;
  const std::string token_ = RandomToken();
  std::vector<Process> processes_;
};

TEST_F(WanemUp, RanksOnEmulatedHostsAllReduceAcrossTheEmulatedWan) {
  Up(HMC_SOURCE_DIR "/perf/topologies/us-eu.topo");
  const std::vector<std::string> hosts = {"us-0", "us-1", "eu-0", "eu-1"};
  Exec("us-0", {HMC_COORDINATOR_PATH, "--bind=10.201.0.1:29400", "--world_size=4"});
  for (size_t r = 0; r < hosts.size(); ++r) {
    Exec(hosts[r], {"HMC_COORDINATOR=10.201.0.1:29400", absl::StrCat("HMC_RANK=", r),
                    "HMC_ZONE=" + hosts[r].substr(0, 2), HMC_HELLO_PATH, "--count=200003"});
  }
  ExpectEveryProcessSucceeds();
  // The emulator counts the packets of every host pair (written once a second): the ranks in
  // the US and in the EU exchanged data through it.
  const std::string counters = "/run/hmc-wanem/" + prefix_ + "/counters";
  uint64_t us_to_eu = 0;
  for (int attempt = 0; attempt < 40 && us_to_eu == 0; ++attempt) {
    absl::SleepFor(absl::Milliseconds(100));
    for (absl::string_view line : absl::StrSplit(ReadFile(counters), '\n')) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      int from, to;
      uint64_t bytes;
      if (f.size() == 6 && absl::SimpleAtoi(f[0], &from) && absl::SimpleAtoi(f[1], &to) &&
          absl::SimpleAtoi(f[3], &bytes) && from < 2 && to >= 2) {
        us_to_eu += bytes;
      }
    }
  }
  EXPECT_GT(us_to_eu, 200003u * 4 / 2) << ReadFile(counters);
}

// Whether one ping from `from` reaches `address` within a second.
bool Pings(const std::string& prefix, const std::string& from, const std::string& address) {
  auto p = Process::Spawn(
      {"ip", "netns", "exec", prefix + "-" + from, "ping", "-c", "1", "-W", "1", address}, {},
      {.output_path = "/dev/null"});
  if (!p.ok()) return false;
  auto code = p->Wait(absl::Now() + absl::Seconds(10));
  return code.ok() && *code == 0;
}

// hmc-wanem cut/heal between regions of a running emulator: packets stop and flow again, and
// within the US nothing changes.
TEST_F(WanemUp, CutSilencesTheLinksBetweenRegionsAndHealRestoresThem) {
  Up(HMC_SOURCE_DIR "/perf/topologies/us-eu.topo");
  EXPECT_TRUE(Pings(prefix_, "us-0", "10.201.0.3"));
  const std::string output = testing::TempDir() + "/cut.out";
  ASSERT_EQ(RunWanem({"cut", "us", "eu", "--prefix=" + prefix_}, output), 0) << ReadFile(output);
  EXPECT_TRUE(absl::StrContains(ReadFile(output), "cut us <-> eu (8 directions)"))
      << ReadFile(output);
  EXPECT_FALSE(Pings(prefix_, "us-0", "10.201.0.3"));
  EXPECT_FALSE(Pings(prefix_, "eu-1", "10.201.0.2"));
  EXPECT_TRUE(Pings(prefix_, "us-0", "10.201.0.2"));
  ASSERT_EQ(RunWanem({"degrade", "us-0", "eu-0", "--rate=5", "--prefix=" + prefix_}), 0);
  ASSERT_EQ(RunWanem({"heal", "us", "eu", "--prefix=" + prefix_}), 0);
  EXPECT_TRUE(Pings(prefix_, "us-0", "10.201.0.3"));
  EXPECT_TRUE(Pings(prefix_, "eu-1", "10.201.0.2"));
  EXPECT_EQ(RunWanem({"cut", "us", "mars", "--prefix=" + prefix_}, output), 1);
  EXPECT_TRUE(absl::StrContains(ReadFile(output), "no host or region 'mars'")) << ReadFile(output);
}

// hmcrun's network-namespace spawner: an inventory of the emulated hosts (groups are regions)
// starts every rank inside its host's namespace, with the coordinator listening inside the first.
TEST_F(WanemUp, HmcrunRunsRanksInTheEmulatedHosts) {
  Up(HMC_SOURCE_DIR "/perf/topologies/us-eu.topo");
  const std::string inventory = testing::TempDir() + "/wan.ini";
  std::ofstream(inventory) << "[all:vars]\nansible_connection=netns\n[us]\n"
                           << "us-0 ansible_host=10.201.0.1 netns=" << prefix_ << "-us-0\n"
                           << "us-1 ansible_host=10.201.0.2 netns=" << prefix_ << "-us-1\n[eu]\n"
                           << "eu-0 ansible_host=10.201.0.3 netns=" << prefix_ << "-eu-0\n"
                           << "eu-1 ansible_host=10.201.0.4 netns=" << prefix_ << "-eu-1\n";
  const std::string output = testing::TempDir() + "/hmcrun_wan.out";
  auto p = Process::Spawn(
      {HMC_HMCRUN_PATH, "-hosts", inventory, "--timeout=100s", HMC_HELLO_PATH, "--count=50001"}, {},
      {.output_path = output});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<int> code = p->Wait(absl::Now() + absl::Seconds(120));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0) << ReadFile(output);
  EXPECT_TRUE(absl::StrContains(ReadFile(output), "coordinator 10.201.0.1:")) << ReadFile(output);
  EXPECT_TRUE(absl::StrContains(ReadFile(output),
                                "[3 eu eu-1] rank 3/4 (zone eu): allreduce of "
                                "50001 floats correct"))
      << ReadFile(output);
}

// Two sites of two hosts whose path between them caps a single TCP flow at 1/8 of its
// capacity. The ring runs a-0, a-1 (short), b-0 (long), b-1 (short), a-0 (long). The probe at
// creation must time each link on its own (a ring of pings would time every link as the slowest),
// see one stream reach the cap and all of them fill the path on the long links, choose about
// eight streams for them and one or two inside a site, where one stream fills the NIC. Each
// direction of the path carries one ring link's data and the other's acknowledgements. Jumbo
// frames: a sixth of the packets for the user-space emulator to forward, so that it carries the
// paths' 80 Mbit/s under the sanitizers too.
TEST_F(WanemUp, StreamProbeFindsThePerFlowCapOnLongLinksAndOneStreamInASite) {
  const std::string topology = testing::TempDir() + "/capped.topo";
  std::ofstream out(topology);
  for (const char* site : {"a", "b"}) {
    out << "region " << site << " nic=200Mbit\nhost " << site << "-0 region=" << site << "\nhost "
        << site << "-1 region=" << site << "\npath " << site << " " << site
        << " rtt=0.2ms capacity=10Gbit\n";
  }
  out << "path a b rtt=20ms capacity=80Mbit flow=10Mbit\n";
  out.close();
  Up(topology, 9000);
  Exec("a-0", {HMC_COORDINATOR_PATH, "--bind=10.201.0.1:29400", "--world_size=4"});
  const std::vector<std::string> hosts = {"a-0", "a-1", "b-0", "b-1"};
  std::vector<std::string> outputs;
  for (int r = 0; r < 4; ++r) {
    outputs.push_back(testing::TempDir() + absl::StrCat("/streams", r, ".out"));
    Exec(hosts[r],
         {"HMC_COORDINATOR=10.201.0.1:29400", absl::StrCat("HMC_RANK=", r), HMC_TEST_RANK_PATH,
          "streams"},
         outputs.back());
  }
  ExpectEveryProcessSucceeds();
  for (int r = 0; r < 4; ++r) {
    const std::string text = ReadFileWithoutLogLines(outputs[r]);
    int streams = 0, probed = 0, long_streams = 0, short_streams = 0, link = 0;
    double rtt = 0, one = 0, all = 0;
    ASSERT_EQ(
        std::sscanf(text.c_str(),
                    "streams %d probed %d long %d short %d rtt %lf one %lf all %lf link %d",
                    &streams, &probed, &long_streams, &short_streams, &rtt, &one, &all, &link),
        8)
        << text;
    EXPECT_EQ(probed, 1) << text;
    EXPECT_GE(long_streams, 5) << text;
    EXPECT_LE(long_streams, 10) << text;
    EXPECT_LE(short_streams, 2) << text;
    if (r % 2 == 1) {  // From its site mate.
      EXPECT_LT(rtt, 5.0) << text;
      continue;
    }
    EXPECT_GT(rtt, 18.0) << text;
    // One flow is held to its cap (10 Mbit/s), all of them to the path (80 Mbit/s): above either
    // is a wrong measurement (before the receiver timed bytes as the sockets delivered them,
    // chunks that overtook a late one counted late: 89.8 Mbit/s once). How close to them a loaded
    // machine gets varies, so below them the test asks only that every flow together carried
    // several times what one did, measured in the same run.
    EXPECT_LT(one, 11.0) << text;
    EXPECT_LT(all, 88.0) << text;
    EXPECT_GT(all, 4 * one) << text;
  }
}

// Adaptive streams (StreamAdapter) end to end: two sites joined by a path that caps each flow at
// a tenth of its capacity. Both ranks start every cross-site link on one stream; the receivers
// time the all-reduce's own segments and ask for more streams until more stop helping, and the
// calls get faster. Without the adapter every call runs over one stream at the per-flow cap.
TEST_F(WanemUp, StreamsAdaptToAPerFlowCapFromTheCollectivesOwnTransfers) {
  const std::string topology = testing::TempDir() + "/adapt.topo";
  std::ofstream(topology) << "region a\nregion b\nhost a-0 region=a\nhost b-0 region=b\n"
                             "path a a rtt=0.2ms capacity=10Gbit\npath b b rtt=0.2ms "
                             "capacity=10Gbit\npath a b rtt=20ms capacity=200Mbit flow=20Mbit\n";
  Up(topology, 9000);
  Exec("a-0", {HMC_COORDINATOR_PATH, "--bind=10.201.0.1:29400", "--world_size=2"});
  std::vector<std::string> outputs;
  for (int r = 0; r < 2; ++r) {
    outputs.push_back(testing::TempDir() + absl::StrCat("/adapt", r, ".out"));
    Exec(
        r == 0 ? "a-0" : "b-0",
        {"HMC_COORDINATOR=10.201.0.1:29400", absl::StrCat("HMC_RANK=", r), "HMC_PROBE=0",
         "HMC_ADAPT_STREAMS=1", "HMC_ALGO=ring", "HMC_MAX_STREAMS=16", HMC_TEST_RANK_PATH, "adapt"},
        outputs.back());
  }
  ExpectEveryProcessSucceeds();
  for (int r = 0; r < 2; ++r) {
    const std::string text = ReadFile(outputs[r]);
    double first = 0, last = 0;
    int calls = 0, streams = 0;
    const size_t line = text.find("first ");
    ASSERT_NE(line, std::string::npos) << text;
    ASSERT_EQ(std::sscanf(text.c_str() + line, "first %lf last %lf calls %d streams %d", &first,
                          &last, &calls, &streams),
              4)
        << text;
    EXPECT_GE(streams, 3) << text;  // One without the adapter.
    EXPECT_LT(last * 2.5, first) << text;
  }
}

// Three sites, one behind a NIC a tenth as fast: the link probe at creation must see it, every
// rank must hold the same matrix (a butterfly with balanced shares runs only if all ranks derive
// the same plan), the slow site must get (almost) no share, and int8 between zones must leave
// every rank with the same bits, close to the exact sum, at an egress cost.
// Two streams per peer, fixed, so that no streams probe runs first (StreamProbe* tests it): where
// it chose two here, the link probe read the link it had flooded with 32 streams at 12-15 Mbit/s
// under ASan (61-133 with the count fixed), and at 11-97 in Release (101-156 fixed), which hid the
// slow site. The flood's leftover TCP state is the cause (perf/RESULTS.md, item 8).
TEST_F(WanemUp, LinkProbeGivesASlowSiteNoShare) {
  const std::string topology = testing::TempDir() + "/slow-site.topo";
  std::ofstream out(topology);
  for (const char* site : {"a", "b", "c"}) {
    out << "region " << site << " nic=" << (site[0] == 'c' ? "20Mbit" : "200Mbit") << "\nhost "
        << site << "-0 region=" << site << "\npath " << site << " " << site
        << " rtt=0.2ms capacity=10Gbit\n";
  }
  for (const char* pair : {"a b", "b c", "a c"})
    out << "path " << pair << " rtt=20ms capacity=10Gbit\n";
  out.close();
  Up(topology);
  Exec("a-0", {HMC_COORDINATOR_PATH, "--bind=10.201.0.1:29400", "--world_size=3"});
  std::vector<std::string> outputs;
  for (int r = 0; r < 3; ++r) {
    const std::string site(1, static_cast<char>('a' + r));
    outputs.push_back(testing::TempDir() + absl::StrCat("/links", r, ".out"));
    Exec(site + "-0",
         {"HMC_COORDINATOR=10.201.0.1:29400", absl::StrCat("HMC_RANK=", r),
          absl::StrCat("HMC_ZONE=", site), "HMC_STREAMS=2", HMC_TEST_RANK_PATH, "links"},
         outputs.back());
  }
  ExpectEveryProcessSucceeds();
  for (const std::string& output : outputs) {
    const std::string text = ReadFileWithoutLogLines(output);
    double mbit[3], share[3], rtt[3];
    const char* at = text.c_str();
    for (int r = 0; r < 3; ++r) {
      int rank = -1, used = 0;
      ASSERT_EQ(std::sscanf(at, "rank %d mbit %lf share %lf rtt_ms %lf\n%n", &rank, &mbit[r],
                            &share[r], &rtt[r], &used),
                4)
          << text;
      at += used;
    }
    int identical = 0;
    double error = 1, egress = 0;
    ASSERT_EQ(std::sscanf(at, "identical %d error %lf egress_usd %lf", &identical, &error, &egress),
              3)
        << text;
    // Under all-at-once load the fast sites lose part of their NICs to streams towards the slow
    // one (what a butterfly would see too), so their lead is smaller than the NICs' tenfold.
    EXPECT_GT(mbit[0], 1.5 * mbit[2]) << text;
    EXPECT_GT(mbit[1], 1.5 * mbit[2]) << text;
    EXPECT_LT(share[2], 0.05) << text;
    EXPECT_GT(share[0], 0.4) << text;
    EXPECT_GT(rtt[1], 15) << text;  // 20 ms set, measured from rank 1 to rank 0.
    EXPECT_LT(rtt[1], 60) << text;
    EXPECT_EQ(identical, 1) << text;
    EXPECT_LT(error, 0.01) << text;
    EXPECT_GT(egress, 0) << text;  // Zones a, b, c: the default table's 0.08 $/GB.
  }
}

}  // namespace
}  // namespace hmc
