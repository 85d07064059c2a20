// Ranks on separate emulated hosts: two network namespaces joined by a veth pair, created and
// deleted by this test (it needs root; it skips without it). The coordinator and two ranks run in
// one namespace, two ranks in the other; every rank's transport binds to the address that reaches
// the coordinator, so all traffic crosses the veth link.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "launcher/local_group.h"
#include "launcher/process.h"
#include "tests/testing/two_namespaces.h"

namespace hmc {
namespace {

class NetnsTest : public testing_util::TwoNamespaces {
 protected:
  NetnsTest() : TwoNamespaces("10.231.77", "t") {}

  // Runs the coordinator and four hello_allreduce ranks (two per namespace, a zone each) with
  // `transport`; each rank exits 0 with a correct sum.
  void AllReduceAcrossTheLink(const std::string& transport) {
    const std::string token = RandomToken();
    const std::string coordinator = "10.231.77.1:29400";
    std::vector<Process> processes;
    auto start = [&](const std::string& ns, std::vector<std::string> argv,
                     std::vector<std::string> env) {
      argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
      auto p = Process::Spawn(argv, env);
      ASSERT_TRUE(p.ok()) << p.status();
      processes.push_back(std::move(*p));
    };
    start(a_, {HMC_COORDINATOR_PATH, "--bind=" + coordinator, "--world_size=4"},
          {"HMC_TOKEN=" + token});
    for (int r = 0; r < 4; ++r) {
      start(r < 2 ? a_ : b_, {HMC_HELLO_PATH, "--count=300007"},
            {"HMC_TOKEN=" + token, "HMC_COORDINATOR=" + coordinator, absl::StrCat("HMC_RANK=", r),
             absl::StrCat("HMC_ZONE=", r < 2 ? "a" : "b"), "HMC_CONNECT_TIMEOUT=30s",
             "HMC_TIMEOUT=60s", "HMC_TRANSPORT=" + transport,
             // Inside a namespace UCX finds the ranks over its loopback.
             "UCX_NET_DEVICES=all"});
    }
    // The coordinator exits 0 once every rank joined and left.
    for (size_t i = 0; i < processes.size(); ++i) {
      auto code = processes[i].Wait(absl::Now() + absl::Seconds(90));
      ASSERT_TRUE(code.ok()) << "process " << i << " did not finish";
      EXPECT_EQ(*code, 0) << "process " << i;
    }
  }
};

TEST_F(NetnsTest, RanksInTwoNamespacesAllReduceAcrossTheLink) { AllReduceAcrossTheLink("tcp"); }

#ifdef HMC_HAVE_UCX
// UCX between the ranks of each namespace (a zone), TCP across the veth between the zones: one
// group on two transports, its cross-zone links over a real interface. (UCX 1.13's own TCP finds
// the peer across the veth "unreachable", as its reachability check does for other
// interface pairings (openucx/ucx#7599), so UCX on every link is tested on loopback only.)
TEST_F(NetnsTest, UcxInsideZonesAndTcpBetweenAllReduce) {
  AllReduceAcrossTheLink("intra=ucx,inter=tcp");
}
#endif

}  // namespace
}  // namespace hmc
