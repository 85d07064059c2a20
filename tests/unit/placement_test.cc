// Where a rank's threads run: each local rank's share of a described machine (two packages of
// four cores), the progress threads' part of it nearest the NIC, and on this machine a thread
// that binds itself runs where the installed placement says.
#include "core/placement.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hmc {
namespace {

std::unique_ptr<Machine> TwoPackages() {
  // Two packages, each one NUMA node of four single-thread cores: cpus 0-3 and 4-7.
  auto machine = Machine::Synthetic("pack:2 numa:1 core:4 pu:1");
  EXPECT_TRUE(machine.ok()) << machine.status();
  return std::move(*machine);
}

std::vector<std::string> Shares(const Machine& machine, int local_size,
                                const std::optional<std::string>& nic_cpus = std::nullopt) {
  std::vector<std::string> shares;
  for (int r = 0; r < local_size; ++r) {
    absl::StatusOr<Placement> p = PlanPlacement(machine, {r, local_size, "ib0"}, nic_cpus);
    EXPECT_TRUE(p.ok()) << p.status();
    shares.push_back(p.ok() ? p->cpus : "");
  }
  return shares;
}

TEST(Placement, LocalRanksSplitTheMachineAcrossPackagesFirst) {
  std::unique_ptr<Machine> machine = TwoPackages();
  EXPECT_EQ(machine->AllCpus(), "0-7");
  EXPECT_EQ(Shares(*machine, 1), std::vector<std::string>{"0-7"});
  EXPECT_EQ(Shares(*machine, 2), (std::vector<std::string>{"0-3", "4-7"}));
  EXPECT_EQ(Shares(*machine, 4), (std::vector<std::string>{"0-1", "2-3", "4-5", "6-7"}));
  EXPECT_EQ(Shares(*machine, 8),
            (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"}));
}

TEST(Placement, ProgressThreadsGoWhereTheRanksShareMeetsTheNic) {
  std::unique_ptr<Machine> machine = TwoPackages();
  // The NIC hangs off the second package.
  absl::StatusOr<Placement> far = PlanPlacement(*machine, {0, 2, "ib0"}, "4-7");
  absl::StatusOr<Placement> near = PlanPlacement(*machine, {1, 2, "ib0"}, "4-7");
  absl::StatusOr<Placement> whole = PlanPlacement(*machine, {0, 1, "ib0"}, "4-7");
  absl::StatusOr<Placement> unknown = PlanPlacement(*machine, {0, 1, ""}, std::nullopt);
  ASSERT_TRUE(far.ok() && near.ok() && whole.ok() && unknown.ok());
  EXPECT_EQ(far->progress_cpus, "0-3");  // Its share has no CPU near the NIC: its own share.
  EXPECT_EQ(near->progress_cpus, "4-7");
  EXPECT_EQ(whole->cpus, "0-7");
  EXPECT_EQ(whole->progress_cpus, "4-7");
  EXPECT_EQ(unknown->progress_cpus, "0-7");
  EXPECT_NE(near->Describe().find("near ib0, attached to cpus 4-7"), std::string::npos)
      << near->Describe();
}

TEST(Placement, ALocalRankOutsideTheSizeIsRefused) {
  std::unique_ptr<Machine> machine = TwoPackages();
  EXPECT_FALSE(PlanPlacement(*machine, {2, 2, ""}, std::nullopt).ok());
  EXPECT_FALSE(PlanPlacement(*machine, {0, 0, ""}, std::nullopt).ok());
}

TEST(Placement, LoopbackIsAnInterfaceWithoutAPlace) {
  EXPECT_EQ(InterfaceOf("127.0.0.1"), "lo");
  EXPECT_EQ(InterfaceOf("192.0.2.77"), "");  // TEST-NET-1: no interface of this host.
  absl::StatusOr<std::unique_ptr<Machine>> machine = Machine::Load();
  ASSERT_TRUE(machine.ok()) << machine.status();
  EXPECT_EQ((*machine)->NicLocality("lo"), std::nullopt);
}

// On this machine: a thread that binds itself as a progress thread runs on the progress CPUs,
// a worker on the rank's. The plan here gives the NIC (a stand-in list) the machine's first CPU.
TEST(Placement, ThreadsBindWhereTheInstalledPlacementSays) {
  absl::StatusOr<std::unique_ptr<Machine>> machine = Machine::Load();
  ASSERT_TRUE(machine.ok()) << machine.status();
  const std::string all = (*machine)->AllCpus();
  const std::string first = all.substr(0, all.find_first_of("-,"));
  absl::StatusOr<Placement> plan = PlanPlacement(**machine, {0, 1, "stand-in"}, first);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->cpus, all);
  EXPECT_EQ(plan->progress_cpus, first);
  ASSERT_TRUE(InstallPlacement(std::move(*machine), *plan).ok());
  std::string progress, worker;
  std::thread([&] {
    BindThisThread(ThreadRole::kProgress);
    progress = CurrentThreadCpus();
  }).join();
  std::thread([&] {
    BindThisThread(ThreadRole::kWorker);
    worker = CurrentThreadCpus();
  }).join();
  EXPECT_EQ(progress, first);
  EXPECT_EQ(worker, all);
}

}  // namespace
}  // namespace hmc
