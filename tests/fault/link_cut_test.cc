// A site whose links silently drop everything, detected on the data links alone. Two network
// namespaces joined by a veth pair, created and deleted by this test (root; skipped without it):
// the coordinator and ranks 0 and 1 in one, ranks 2 and 3 in the other. Mid-run, both ends of the
// veth start dropping every packet (a pfifo queue of length 0): nothing is reset or refused. The
// coordinator's heartbeat timeout is two minutes, so only the data links can notice within the
// test: their unacknowledged data (TCP_USER_TIMEOUT, the ranks' 2 s heartbeat_timeout) fails
// them, the ranks report it, and ranks 0 and 1 finish every round between themselves; the cut-off
// ranks end with an error, not a hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "perf/fault/fault_trial.h"
#include "tests/testing/command.h"

namespace hmc::fault {
namespace {

int Run(const std::vector<std::string>& argv) {
  return testing_util::RunCommand(argv, absl::Seconds(30)).code;
}

class LinkCutTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "creating network namespaces needs root";
    const std::string id = absl::StrCat(getpid() % 100000);
    a_ = "hmc-c" + id + "a";
    b_ = "hmc-c" + id + "b";
    va_ = "hc" + id + "a";
    vb_ = "hc" + id + "b";
    if (hmc::fault::Run({"ip", "netns", "add", a_}) != 0)
      GTEST_SKIP() << "ip netns is not available";
    created_ = true;
    ASSERT_EQ(hmc::fault::Run({"ip", "netns", "add", b_}), 0);
    ASSERT_EQ(hmc::fault::Run({"ip", "link", "add", va_, "netns", a_, "type", "veth", "peer",
                               "name", vb_, "netns", b_}),
              0);
    for (const auto& [ns, dev, address] :
         {std::tuple{a_, va_, "10.231.78.1/24"}, std::tuple{b_, vb_, "10.231.78.2/24"}}) {
      ASSERT_EQ(hmc::fault::Run({"ip", "-n", ns, "addr", "add", address, "dev", dev}), 0);
      ASSERT_EQ(hmc::fault::Run({"ip", "-n", ns, "link", "set", dev, "up"}), 0);
      ASSERT_EQ(hmc::fault::Run({"ip", "-n", ns, "link", "set", "lo", "up"}), 0);
    }
  }

  void TearDown() override {
    if (!created_) return;
    hmc::fault::Run(
        {"ip", "netns", "del", a_});  // Deleting a namespace removes its end of the veth pair.
    hmc::fault::Run({"ip", "netns", "del", b_});
  }

  std::string a_, b_, va_, vb_;
  bool created_ = false;
};

TEST_F(LinkCutTest, RanksBeyondASilentLinkAreDroppedByTheDataLinks) {
  TrialSpec spec;
  spec.rank_binary = HMC_FAULT_RANK_PATH;
  spec.work_dir = testing::TempDir();
  spec.fault = FaultKind::kCut;
  spec.rounds = 12;
  spec.count = 1 << 18;
  spec.pause = absl::Milliseconds(5);
  spec.heartbeat_timeout = absl::Seconds(2);  // The data links' liveness timeout.
  spec.coordinator_heartbeat_timeout = absl::Minutes(2);
  spec.coordinator_bind = "10.231.78.1:0";
  spec.coordinator_netns = a_;
  spec.limit = absl::Seconds(100);
  spec.rank_prefix = [&](int rank) {
    return std::vector<std::string>{"ip", "netns", "exec", rank < 2 ? a_ : b_};
  };
  spec.cut_off = {2, 3};
  spec.cut = [&] {
    for (const auto& [ns, dev] : {std::pair{a_, va_}, std::pair{b_, vb_}}) {
      EXPECT_EQ(hmc::fault::Run({"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev,
                                 "root", "pfifo", "limit", "0"}),
                0);
    }
  };
  absl::StatusOr<TrialResult> r = RunTrial(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string problems = absl::StrJoin(r->problems, "\n");
  EXPECT_FALSE(r->hang) << problems;
  EXPECT_EQ(r->inconsistent, 0) << problems;
  EXPECT_EQ(r->lost, 0) << problems;
  EXPECT_EQ(r->rounds, spec.rounds) << problems;
  // Detected by the data links' 2 s timeout, far inside the coordinator's two minutes.
  EXPECT_LT(r->recovery, absl::Seconds(60)) << problems;
}

}  // namespace
}  // namespace hmc::fault
