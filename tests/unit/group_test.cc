// Group::Make: the members of an epoch as calls see them, here what of a CPU each has.
#include "collectives/group.h"

#include <gtest/gtest.h>

namespace hmc {
namespace {

PeerTable Table(const std::vector<std::pair<std::string, int>>& host_and_cpus) {
  PeerTable table;
  for (const auto& [host, cpus] : host_and_cpus) {
    table.peers.push_back(
        PeerEntry{.rank = static_cast<int>(table.peers.size()), .hostname = host, .cpus = cpus});
  }
  table.world_size = static_cast<int>(table.peers.size());
  return table;
}

double CpuShareOf(const PeerTable& table) {
  const std::vector<std::shared_ptr<Channel>> channels(table.peers.size());
  return Group::Make(table, 0, channels, LinkMatrix())->cpu_share;
}

TEST(Group, CpuShareIsTheMostCrowdedHostsCpusPerMember) {
  // A host with a CPU for each of its ranks, or more: a whole CPU each.
  EXPECT_DOUBLE_EQ(CpuShareOf(Table({{"a", 2}, {"a", 2}, {"b", 64}})), 1.0);
  // Four ranks on a host of 2 CPUs: half a CPU each, whatever the other host has.
  EXPECT_DOUBLE_EQ(CpuShareOf(Table({{"a", 2}, {"a", 2}, {"a", 2}, {"a", 2}, {"b", 1}})), 0.5);
  EXPECT_DOUBLE_EQ(CpuShareOf(Table({{"a", 8}, {"b", 1}, {"b", 1}, {"b", 1}})), 1.0 / 3);
  // A host that did not say (a rank of an older table, CreateFromChannels): no sharing assumed.
  EXPECT_DOUBLE_EQ(CpuShareOf(Table({{"a", 0}, {"a", 0}, {"a", 0}})), 1.0);
  // A failed member no longer crowds its host.
  PeerTable table = Table({{"a", 1}, {"a", 1}, {"a", 1}});
  table.peers[2].alive = false;
  EXPECT_DOUBLE_EQ(CpuShareOf(table), 0.5);
}

}  // namespace
}  // namespace hmc
