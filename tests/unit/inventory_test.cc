// The inventory parser, rank placement and the commands built for each kind of host.
#include "launcher/inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "launcher/coordinator_host.h"
#include "launcher/rank_command.h"

namespace hmc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Inventory Parse(absl::string_view text) {
  absl::StatusOr<Inventory> inventory = ParseInventory(text, "inv");
  EXPECT_TRUE(inventory.ok()) << inventory.status();
  return inventory.ok() ? *inventory : Inventory{};
}

std::string ErrorOf(absl::string_view text) {
  absl::StatusOr<Inventory> inventory = ParseInventory(text, "inv");
  EXPECT_FALSE(inventory.ok());
  return std::string(inventory.status().message());
}

TEST(Inventory, GroupsAreZonesAndVariablesResolveHostOverGroupOverAll) {
  const Inventory inv = Parse(R"(# the experiments' inventory
[all:vars]
ansible_user=ubuntu
slots=2

[us]
us-0 ansible_host=10.0.0.1 ansible_port=2222 ; a comment
us-1 ansible_host="10.0.0.2" slots=4  # inline comment

[eu]
eu-0 ansible_host=10.1.0.1 zone=eu-west gpus=8 hmc_streams=8

[eu:vars]
ansible_user = admin
)");
  ASSERT_EQ(inv.hosts.size(), 3u);
  const InventoryHost& us0 = inv.hosts[0];
  EXPECT_EQ(us0.name, "us-0");
  EXPECT_EQ(us0.address, "10.0.0.1");
  EXPECT_EQ(us0.port, 2222);
  EXPECT_EQ(us0.user, "ubuntu");
  EXPECT_EQ(us0.zone, "us");
  EXPECT_EQ(us0.slots, 2);
  EXPECT_EQ(us0.connection, Connection::kSsh);
  EXPECT_EQ(us0.where, "inv:7");
  EXPECT_EQ(inv.hosts[1].address, "10.0.0.2");
  EXPECT_EQ(inv.hosts[1].slots, 4);
  const InventoryHost& eu0 = inv.hosts[2];
  EXPECT_EQ(eu0.zone, "eu-west");
  EXPECT_EQ(eu0.user, "admin");
  EXPECT_EQ(eu0.gpus, 8);
  EXPECT_EQ(eu0.vars.at("hmc_streams"), "8");
  EXPECT_EQ(inv.slots(), 8);
}

TEST(Inventory, ChildGroupsInheritTheirParentsVariables) {
  const Inventory inv = Parse(R"([cloud:children]
gcp
[cloud:vars]
slots=3
gpus=1
[gcp]
a
[gcp:vars]
gpus=2
)");
  ASSERT_EQ(inv.hosts.size(), 1u);
  EXPECT_EQ(inv.hosts[0].zone, "gcp");
  EXPECT_EQ(inv.hosts[0].slots, 3);
  EXPECT_EQ(inv.hosts[0].gpus, 2);
}

TEST(Inventory, MpiHostfileAndConnections) {
  const Inventory inv = Parse(
      "localhost slots=2\n127.0.0.5\nnode7 slots=1\nns-host netns=hmcw-us-0\n"
      "loop ansible_host=127.0.0.1 ansible_connection=ssh\n");
  ASSERT_EQ(inv.hosts.size(), 5u);
  EXPECT_EQ(inv.hosts[0].connection, Connection::kLocal);
  EXPECT_EQ(inv.hosts[0].zone, "default");
  EXPECT_EQ(inv.hosts[1].connection, Connection::kLocal);
  EXPECT_EQ(inv.hosts[2].connection, Connection::kSsh);
  EXPECT_EQ(inv.hosts[3].connection, Connection::kNetns);
  EXPECT_EQ(inv.hosts[4].connection, Connection::kSsh);
}

TEST(Inventory, MalformedLinesAreRefusedWithFileLineAndWhatWasExpected) {
  EXPECT_EQ(ErrorOf("[us\na\n"), "inv:1: expected ']' to close the section header");
  EXPECT_EQ(ErrorOf("[us]\na slots\n"), "inv:2: expected 'key=value', got 'slots'");
  EXPECT_EQ(ErrorOf("a\n\nb slots=0\n"), "inv:3: slots=0: expected an integer in 1..4096");
  EXPECT_EQ(ErrorOf("a ansible_port=ssh\n"),
            "inv:1: ansible_port=ssh: expected an integer in 1..65535");
  EXPECT_EQ(ErrorOf("[us:hosts]\n"),
            "inv:1: expected [us], [us:vars] or [us:children], got '[us:hosts]'");
  EXPECT_EQ(ErrorOf("[us:vars]\nslots\n"), "inv:2: expected 'key=value', got 'slots'");
  EXPECT_EQ(ErrorOf("[x:children]\ny\n[z]\na\n"),
            "inv:2: [x:children] names 'y', which is not a group");
  EXPECT_EQ(ErrorOf("a ansible_connection=telnet\n"),
            "inv:1: ansible_connection=telnet: expected local, ssh or netns");
  EXPECT_EQ(ErrorOf("a ansible_host=\"10.0.0.1\n"), "inv:1: expected a closing \"");
  EXPECT_EQ(ErrorOf("# nothing\n[us]\n"), "inv: expected at least one host");
  EXPECT_EQ(ErrorOf("[us]\nslots=2\n"), "inv:2: expected a host name first, got 'slots=2'");
}

TEST(Inventory, DefaultIsFourLocalRanksInTwoZones) {
  const Inventory inv = Parse(DefaultInventoryText());
  ASSERT_EQ(inv.slots(), 4);
  absl::StatusOr<std::vector<RankPlacement>> placed = PlaceRanks(inv, 0);
  ASSERT_TRUE(placed.ok());
  std::vector<std::string> zones;
  for (const RankPlacement& p : *placed) {
    zones.push_back(p.host->zone);
    EXPECT_EQ(p.host->connection, Connection::kLocal);
  }
  EXPECT_THAT(zones, ElementsAre("zone-a", "zone-a", "zone-b", "zone-b"));
}

TEST(Inventory, TheEmulatorInventoryPutsOneHostPerContinentFirst) {
  absl::StatusOr<Inventory> inv = LoadInventory(HMC_SOURCE_DIR "/examples/inventory.wan");
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->hosts.size(), 8u);
  std::vector<std::string> zones;
  for (const InventoryHost& h : inv->hosts) {
    zones.push_back(h.zone);
    EXPECT_EQ(h.connection, Connection::kNetns);
    EXPECT_EQ(h.netns, "hmcw-" + h.name);
  }
  EXPECT_THAT(zones, ElementsAre("us", "eu", "asia", "oce", "us", "eu", "asia", "oce"));
  EXPECT_EQ(inv->hosts[2].address, "10.201.0.5");
}

TEST(PlaceRanks, FillsSlotsInOrderAndRefusesMoreRanksThanSlots) {
  const Inventory inv = Parse("a slots=2\nb slots=3\n");
  absl::StatusOr<std::vector<RankPlacement>> three = PlaceRanks(inv, 3);
  ASSERT_TRUE(three.ok());
  ASSERT_EQ(three->size(), 3u);
  EXPECT_EQ((*three)[1].host->name, "a");
  EXPECT_EQ((*three)[1].local_rank, 1);
  EXPECT_EQ((*three)[2].host->name, "b");
  EXPECT_EQ((*three)[2].local_rank, 0);
  EXPECT_EQ((*three)[2].local_size, 1);
  EXPECT_THAT(PlaceRanks(inv, 6).status().message(), HasSubstr("-np 6: the inventory has 5 slots"));
}

// For ranks on other hosts the coordinator listens on the one interface that reaches them (it
// used to listen on 0.0.0.0, every interface of the machine).
TEST(PlaceCoordinator, ListensOnlyOnTheInterfaceThatReachesRemoteRanks) {
  // A documentation address (RFC 5737): only a route lookup, nothing is sent.
  const Inventory inv = Parse("far ansible_host=198.51.100.7\n");
  absl::StatusOr<std::vector<RankPlacement>> ranks = PlaceRanks(inv, 1);
  ASSERT_TRUE(ranks.ok());
  auto towards = SocketAddress::Parse("198.51.100.7:22");
  ASSERT_TRUE(towards.ok());
  if (!LocalAddressTowards(*towards).ok()) GTEST_SKIP() << "no route to another host here";
  absl::StatusOr<CoordinatorPlacement> placement = PlaceCoordinator(*ranks, "");
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_FALSE(placement->announce_host.empty());
  EXPECT_EQ(placement->bind, placement->announce_host + ":0");
  // The lone loopback inventory stays on loopback.
  const Inventory local = Parse("here ansible_connection=local\n");
  absl::StatusOr<std::vector<RankPlacement>> here = PlaceRanks(local, 1);
  ASSERT_TRUE(here.ok());
  EXPECT_EQ(PlaceCoordinator(*here, "")->bind, "127.0.0.1:0");
}

// Ansible splits ansible_ssh_common_args (and inventory lines) into shell words (shlex); it used
// to be split on spaces, which broke a quoted ProxyCommand into pieces.
TEST(SplitShellWords, QuotesAndBackslashesAsAShellDoes) {
  EXPECT_THAT(*SplitShellWords("  a 'b c'  \"d \\\" e\" f\\ g h'i'j \"\""),
              ElementsAre("a", "b c", "d \" e", "f g", "hij", ""));
  EXPECT_THAT(*SplitShellWords("'it''s' \"a\\b\" 'x\\y'"), ElementsAre("its", "a\\b", "x\\y"));
  EXPECT_THAT(SplitShellWords("'open").status().message(), HasSubstr("expected a closing '"));
  EXPECT_THAT(SplitShellWords("end\\").status().message(), HasSubstr("nothing after a backslash"));
  EXPECT_THAT(ParseInventory("h ansible_host=10.0.0.1 ansible_ssh_common_args='-o \"x'\n", "inv")
                  .status()
                  .message(),
              HasSubstr("inv:1: host h: ansible_ssh_common_args: expected a closing \""));
  EXPECT_THAT(ParseInventory("h ansible_host=-oProxyCommand=x\n", "inv").status().message(),
              HasSubstr("address '-oProxyCommand=x' is not a host name"));
}

TEST(RankCommand, OnlyVariableNamesAreNames) {
  for (const char* good : {"A", "_x", "HMC_TOKEN", "a1_b2"}) EXPECT_TRUE(IsVariableName(good));
  for (const char* bad : {"", "1A", "A;touch /tmp/x;B", "A B", "A-B", "$(x)"}) {
    EXPECT_FALSE(IsVariableName(bad)) << bad;
  }
}

TEST(RankCommand, EachConnectionBuildsItsCommand) {
  const Inventory inv = Parse(
      "l ansible_host=127.0.0.1\nn netns=hmcw-eu-0\n"
      "s ansible_host=10.9.9.9 ansible_user=me ansible_port=2200 "
      "ansible_ssh_private_key_file=/k ansible_ssh_common_args='-o A=b "
      "-o ProxyCommand=\"ssh -W %h:%p -q bastion\"'\n");
  const std::vector<std::string> program = {"/bin/prog", "it's"};
  const std::vector<std::string> env = {"HMC_RANK=1", "HMC_TOKEN=s3cret", "X=a b"};
  RankCommand local = BuildRankCommand(inv.hosts[0], program, env, {});
  EXPECT_EQ(local.argv, program);
  EXPECT_EQ(local.env, env);
  EXPECT_FALSE(local.stdin_pipe);
  RankCommand netns = BuildRankCommand(inv.hosts[1], program, env, {});
  EXPECT_THAT(netns.argv, ElementsAre("ip", "netns", "exec", "hmcw-eu-0", "/bin/prog", "it's"));
  RankCommand ssh = BuildRankCommand(inv.hosts[2], program, env, {.working_dir = "/w"});
  EXPECT_THAT(ssh.argv,
              ElementsAre("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", "-p", "2200",
                          "-l", "me", "-i", "/k", "-o", "A=b", "-o",
                          "ProxyCommand=ssh -W %h:%p -q bastion", "--", "10.9.9.9",
                          ::testing::StartsWith("cd '/w' 2>/dev/null; export HMC_RANK='1' "
                                                "X='a b'; exec 3<&0; IFS= read -r HMC_TOKEN <&3; "
                                                "export HMC_TOKEN; '/bin/prog' 'it'\\''s'")));
  EXPECT_TRUE(ssh.stdin_pipe);
  // The token travels on stdin, never on a command line.
  EXPECT_EQ(ssh.stdin_text, "s3cret\n");
  for (const std::string& arg : ssh.argv) EXPECT_FALSE(absl::StrContains(arg, "s3cret")) << arg;
  RankCommand moved = BuildRankCommand(inv.hosts[2], program, env, {.remote_path = "/opt/p"});
  EXPECT_THAT(moved.argv.back(), HasSubstr("'/opt/p' 'it'\\''s'"));
  // Without a token nothing waits for one: the program starts straight away.
  RankCommand tokenless = BuildRankCommand(inv.hosts[2], program, {"HMC_RANK=1"}, {});
  EXPECT_THAT(tokenless.argv.back(), HasSubstr("exec 3<&0; '/bin/prog'"));
  EXPECT_EQ(tokenless.stdin_text, "");
}

}  // namespace
}  // namespace hmc
