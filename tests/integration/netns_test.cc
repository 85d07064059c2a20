// Ranks on separate emulated hosts: two network namespaces joined by a veth pair, created and
// deleted by this test (it needs root; it skips without it). The coordinator and two ranks run in
// one namespace, two ranks in the other; every rank's transport binds to the address that reaches
// the coordinator, so all traffic crosses the veth link.
#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "launcher/local_group.h"
#include "launcher/process.h"

namespace hmc {
namespace {

int RunCommand(const std::vector<std::string>& argv) {
  auto p = Process::Spawn(argv, {});
  if (!p.ok()) return -1;
  auto code = p->Wait(absl::Now() + absl::Seconds(30));
  return code.ok() ? *code : -1;
}

class NetnsTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "creating network namespaces needs root";
    const std::string id = absl::StrCat(getpid() % 100000);
    a_ = "hmc-t" + id + "a";
    b_ = "hmc-t" + id + "b";
    if (RunCommand({"ip", "netns", "add", a_}) != 0) GTEST_SKIP() << "ip netns is not available";
    created_ = true;
    ASSERT_EQ(RunCommand({"ip", "netns", "add", b_}), 0);
    const std::string va = "hv" + id + "a", vb = "hv" + id + "b";
    ASSERT_EQ(RunCommand({"ip", "link", "add", va, "netns", a_, "type", "veth", "peer", "name", vb,
                          "netns", b_}),
              0);
    for (const auto& [ns, dev, address] :
         {std::tuple{a_, va, "10.231.77.1/24"}, std::tuple{b_, vb, "10.231.77.2/24"}}) {
      ASSERT_EQ(RunCommand({"ip", "-n", ns, "addr", "add", address, "dev", dev}), 0);
      ASSERT_EQ(RunCommand({"ip", "-n", ns, "link", "set", dev, "up"}), 0);
      ASSERT_EQ(RunCommand({"ip", "-n", ns, "link", "set", "lo", "up"}), 0);
    }
  }

  void TearDown() override {
    if (!created_) return;
    RunCommand(
        {"ip", "netns", "del", a_});  // Deleting a namespace removes its end of the veth pair.
    RunCommand({"ip", "netns", "del", b_});
  }

  std::string a_, b_;
  bool created_ = false;
};

TEST_F(NetnsTest, RanksInTwoNamespacesAllReduceAcrossTheLink) {
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
           "HMC_TIMEOUT=60s"});
  }
  // The coordinator exits 0 once every rank joined and left; each rank exits 0 with a correct sum.
  for (size_t i = 0; i < processes.size(); ++i) {
    auto code = processes[i].Wait(absl::Now() + absl::Seconds(90));
    ASSERT_TRUE(code.ok()) << "process " << i << " did not finish";
    EXPECT_EQ(*code, 0) << "process " << i;
  }
}

}  // namespace
}  // namespace hmc
