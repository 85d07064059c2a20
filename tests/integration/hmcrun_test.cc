// hmcrun end to end: real processes started through the local spawner and through ssh against
// a real sshd that the test starts on a loopback port (with generated keys) and stops by PID.
// The network-namespace spawner is tested under the emulator (wanem_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "launcher/process.h"
#include "tests/testing/command.h"

namespace hmc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using testing_util::Outcome;
using testing_util::ReadFile;
using testing_util::TempPath;

std::string WriteInventory(absl::string_view name, absl::string_view text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

Outcome Hmcrun(std::vector<std::string> args, absl::Duration limit = absl::Seconds(120)) {
  args.insert(args.begin(), HMC_HMCRUN_PATH);
  return testing_util::RunCommand(args, limit);
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

TEST(Hmcrun, RunsAGroupOnTheBuiltInInventoryWithPrefixedOutput) {
  Outcome run = Hmcrun({HMC_HELLO_PATH, "--count=100003"});
  EXPECT_EQ(run.code, 0) << run.output;
  for (const char* line : {"[0 zone-a peer-a] rank 0/4 (zone zone-a): allreduce of 100003 floats "
                           "correct",
                           "[3 zone-b peer-b] rank 3/4 (zone zone-b): allreduce of 100003 floats "
                           "correct"}) {
    EXPECT_THAT(run.output, HasSubstr(line));
  }
}

TEST(Hmcrun, ExportsWhereEachRankSitsAndPassesVariables) {
  const std::string inventory = WriteInventory("env.ini", R"([east]
e1 ansible_host=127.0.0.1 slots=2 gpus=4
[west]
w1 ansible_host=127.0.0.1 hmc_streams=3
)");
  Outcome run =
      Hmcrun({"-hosts", inventory, "-x", "HMC_TEST_MARK=yes", "--algo=ring", "/bin/sh", "-c",
              "echo r=$HMC_RANK/$HMC_WORLD_SIZE z=$HMC_ZONE h=$HMC_HOST "
              "l=$HMC_LOCAL_RANK/$HMC_LOCAL_SIZE g=$HMC_GPUS s=$HMC_STREAMS a=$HMC_ALGO "
              "m=$HMC_TEST_MARK c=${HMC_COORDINATOR%:*} t=${#HMC_TOKEN}"});
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("[0 east e1] r=0/3 z=east h=e1 l=0/3 g=4 s=0 a=ring m=yes "
                                    "c=127.0.0.1 t=64"));
  EXPECT_THAT(run.output, HasSubstr("[1 east e1] r=1/3 z=east h=e1 l=1/3"));
  EXPECT_THAT(run.output, HasSubstr("[2 west w1] r=2/3 z=west h=w1 l=2/3 g=0 s=3 a=ring"));
}

TEST(Hmcrun, ExitsWithTheFirstFailingRanksStatusAndStopsTheOthers) {
  const std::string pids = TempPath("pids");
  Outcome run =
      Hmcrun({"-np", "3", "/bin/sh", "-c",
              absl::StrCat("echo $$ >> ", pids,
                           "; if [ $HMC_RANK = 1 ]; then sleep 0.5; exit 7; fi; exec sleep 60")},
             absl::Seconds(30));
  EXPECT_EQ(run.code, 7) << run.output;
  EXPECT_THAT(run.output, HasSubstr("rank 1 (peer-a, (built-in inventory.local):4) exited with "
                                    "status 7; stopping the others"));
  for (absl::string_view line : absl::StrSplit(ReadFile(pids), '\n', absl::SkipEmpty())) {
    int pid;
    ASSERT_TRUE(absl::SimpleAtoi(line, &pid));
    EXPECT_FALSE(Alive(pid)) << "rank process " << pid << " still runs";
  }
}

// The hash in each rank's "state round=R hash=H" line for round `round`, in output order.
std::vector<std::string> StateHashes(const std::string& output, int round) {
  std::vector<std::string> hashes;
  const std::string mark = absl::StrCat("state round=", round, " hash=");
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (const size_t at = line.find(mark); at != absl::string_view::npos) {
      hashes.emplace_back(line.substr(at + mark.size()));
    }
  }
  return hashes;
}

// --restart=on-failure: a rank killed mid-run is started again, joins the running group as a new
// rank, downloads the state the others keep, and every rank ends with the same state.
TEST(Hmcrun, RestartsAFailedRankWhichRejoinsWithTheGroupsState) {
  Outcome run = Hmcrun({"-np", "3", "--restart=on-failure", "--heartbeat_interval=250ms",
                        HMC_FAULT_RANK_PATH, "--rounds=150", "--pause=10ms", "--count=4096",
                        "--state=65536", "--die_id=1", "--die_at=10"},
                       absl::Seconds(120));
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("exited with status 137; restarting it (restart 1 of 3"));
  EXPECT_THAT(run.output, HasSubstr("rank 3 joined the group"));
  EXPECT_THAT(run.output, HasSubstr("downloaded the members' state"));
  EXPECT_THAT(run.output, HasSubstr("training resumed"));
  const std::vector<std::string> last = StateHashes(run.output, 149);
  ASSERT_EQ(last.size(), 3u) << run.output;
  EXPECT_EQ(last[0], last[1]);
  EXPECT_EQ(last[0], last[2]);
}

// --restart=on-failure runs the coordinator as a process of its own: killed mid-run, it is
// started again at the same address, rebuilds the membership from the live ranks, and admits
// the replacement of a rank that dies afterwards; the job ends with every rank in the same state.
TEST(Hmcrun, RestartsItsCoordinatorWhichAdmitsALaterReplacement) {
  const std::string output = TempPath("coordinator_restart.out");
  absl::StatusOr<Process> hmcrun = Process::Spawn(
      {HMC_HMCRUN_PATH, "-np", "3", "--restart=on-failure", "--heartbeat_interval=250ms",
       HMC_FAULT_RANK_PATH, "--rounds=400", "--pause=10ms", "--count=4096", "--state=65536",
       "--die_id=1", "--die_at=250"},
      {}, {.output_path = output});
  ASSERT_TRUE(hmcrun.ok()) << hmcrun.status();
  // The coordinator's pid is in hmcrun's first line; it dies once training is under way.
  int coordinator = 0;
  bool under_way = false;
  for (int polls = 0; polls < 3000 && !under_way; ++polls) {
    absl::SleepFor(absl::Milliseconds(10));
    const std::string text = ReadFile(output);
    const std::string mark = "hmcrun: 3 ranks on 2 hosts, coordinator ";
    const size_t line = text.find(mark);
    const size_t at = text.find(" (pid ", line);
    if (coordinator == 0 && line != std::string::npos && at != std::string::npos) {
      ASSERT_TRUE(absl::SimpleAtoi(text.substr(at + 6, text.find(')', at) - at - 6), &coordinator))
          << text;
    }
    under_way = coordinator != 0 && absl::StrContains(text, "committed round=50 ");
  }
  ASSERT_TRUE(under_way) << ReadFile(output);
  ASSERT_EQ(kill(coordinator, SIGKILL), 0);
  absl::StatusOr<int> code = hmcrun->Wait(absl::Now() + absl::Seconds(120));
  const std::string text = ReadFile(output);
  ASSERT_TRUE(code.ok()) << text;
  EXPECT_EQ(*code, 0) << text;
  EXPECT_THAT(text, HasSubstr("the coordinator exited with status 137; restarted it at the same "
                              "address"));
  EXPECT_THAT(text, HasSubstr("exited with status 137; restarting it (restart 1 of 3"));
  EXPECT_THAT(text, HasSubstr("rank 3 joined the group"));
  EXPECT_FALSE(Alive(coordinator));
  const std::vector<std::string> last = StateHashes(text, 399);
  ASSERT_EQ(last.size(), 3u) << text;
  EXPECT_EQ(last[0], last[1]);
  EXPECT_EQ(last[0], last[2]);
}

// Without --restart a failed rank stops the group, as before; -np MIN:MAX forms the group with
// MIN ranks and lets the others join.
TEST(Hmcrun, ElasticGroupFormsWithMinRanksAndTheOthersJoin) {
  Outcome run = Hmcrun({"-np", "2:4", HMC_FAULT_RANK_PATH, "--rounds=200", "--pause=10ms",
                        "--count=4096", "--state=4096"},
                       absl::Seconds(120));
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("(elastic: 2 to 4)"));
  EXPECT_THAT(run.output, HasSubstr("rank 2 joined the group"));
  EXPECT_THAT(run.output, HasSubstr("rank 3 joined the group"));
  EXPECT_THAT(run.output, HasSubstr("contributors=0,1,2,3 "));
  const std::vector<std::string> last = StateHashes(run.output, 199);
  ASSERT_EQ(last.size(), 4u) << run.output;
  for (const std::string& hash : last) EXPECT_EQ(hash, last[0]);
}

TEST(Hmcrun, ForwardsSigtermToEveryRank) {
  const std::string marks = TempPath("marks");
  const std::string output = TempPath("sigterm.out");
  auto p =
      Process::Spawn({HMC_HMCRUN_PATH, "/bin/sh", "-c",
                      absl::StrCat("trap 'echo term-$HMC_RANK >> ", marks,
                                   "; exit 0' TERM; echo ready >> ", marks, "; sleep 60 & wait")},
                     {}, {.output_path = output});
  ASSERT_TRUE(p.ok());
  // Every rank installed its trap (bounded wait).
  for (int i = 0; i < 200; ++i) {
    std::vector<std::string> lines = absl::StrSplit(ReadFile(marks), '\n', absl::SkipEmpty());
    if (lines.size() >= 4) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  p->Signal(SIGTERM);
  absl::StatusOr<int> code = p->Wait(absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 128 + SIGTERM) << ReadFile(output);
  const std::string got = ReadFile(marks);
  for (int r = 0; r < 4; ++r) EXPECT_THAT(got, HasSubstr(absl::StrCat("term-", r))) << got;
}

TEST(Hmcrun, TimeoutKillsEveryRank) {
  Outcome run = Hmcrun({"--timeout", "1s", "/bin/sleep", "60"}, absl::Seconds(30));
  EXPECT_EQ(run.code, 124) << run.output;
  EXPECT_THAT(run.output, HasSubstr("ran past its timeout of 1s"));
}

TEST(Hmcrun, RefusesAMalformedInventoryNamingTheLine) {
  const std::string inventory = WriteInventory("bad.ini", "[us]\nus-0 slots=two\n");
  Outcome run = Hmcrun({"-hosts", inventory, "/bin/true"});
  EXPECT_EQ(run.code, 2);
  EXPECT_THAT(run.output, HasSubstr(inventory + ":2: slots=two: expected an integer"));
  run = Hmcrun({"-np", "9", "/bin/true"});
  EXPECT_EQ(run.code, 2);
  EXPECT_THAT(run.output, HasSubstr("-np 9: the inventory has 4 slots"));
  run = Hmcrun({"--algo=fast", "/bin/true"});
  EXPECT_EQ(run.code, 2);
  EXPECT_THAT(run.output, HasSubstr("algo=fast: must be auto or one of ring, "));
}

TEST(Hmcrun, JoinsACoordinatorStartedElsewhere) {
  const std::string port = absl::StrCat(30000 + getpid() % 20000);
  auto coordinator =
      Process::Spawn({HMC_COORDINATOR_PATH, "--bind=127.0.0.1:" + port, "--world_size=2"},
                     {"HMC_TOKEN=elsewhere"}, {.output_path = TempPath("coordinator.out")});
  ASSERT_TRUE(coordinator.ok());
  Outcome run = Hmcrun({"-np", "2", "--coordinator", "127.0.0.1:" + port, "--token", "elsewhere",
                        HMC_HELLO_PATH, "--count=1000"});
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("coordinator 127.0.0.1:" + port));
  EXPECT_THAT(run.output, HasSubstr("[1 zone-a peer-a] rank 1/2"));
  EXPECT_TRUE(coordinator->Wait(absl::Now() + absl::Seconds(30)).ok());
}

// --tls=on reaches the coordinator, hosted by hmcrun or (--restart=on-failure) run as
// hmc-coordinator: every rank joins over TLS 1.3, and a host whose inventory turns TLS off is
// refused by the coordinator, naming the cause on both sides.
TEST(Hmcrun, TlsOnIsRequiredByTheCoordinatorHostedOrStarted) {
  const std::string plain_host = WriteInventory("tls.ini", R"([zone-a]
peer-a ansible_host=127.0.0.1 slots=1
[zone-b]
peer-b ansible_host=127.0.0.1 slots=1 hmc_tls=off
)");
  for (const char* coordinator : {"--restart=no", "--restart=on-failure"}) {
    SCOPED_TRACE(coordinator);
    Outcome run = Hmcrun({"-np", "2", coordinator, "--tls=on", HMC_HELLO_PATH, "--count=1000"});
    EXPECT_EQ(run.code, 0) << run.output;
    EXPECT_THAT(run.output, HasSubstr("[1 zone-a peer-a] rank 1/2"));
    EXPECT_THAT(run.output, HasSubstr("protection TLS 1.3 TLS_")) << run.output;
    EXPECT_THAT(run.output, Not(HasSubstr("protection none")));

    run = Hmcrun({"-hosts", plain_host, coordinator, "--tls=on", HMC_HELLO_PATH, "--count=1000"});
    EXPECT_NE(run.code, 0) << run.output;
    EXPECT_THAT(run.output, HasSubstr("[1 zone-b peer-b] hello_allreduce: PERMISSION_DENIED: "
                                      "coordinator 127.0.0.1:"));
    EXPECT_THAT(run.output, HasSubstr("hmc[coordinator] rejected 127.0.0.1:"));
    EXPECT_THAT(run.output, HasSubstr("requires TLS from 127.0.0.1:"));
    EXPECT_THAT(run.output, HasSubstr("(its option tls is on)"));
  }
}

TEST(HmcCoordinator, RefusesBadTlsFlagsBeforeListening) {
  Outcome run = testing_util::RunCommand(
      {HMC_COORDINATOR_PATH, "--insecure", "--world_size=2", "--tls=maybe"}, absl::Seconds(30));
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("tls must be auto, on or off, not 'maybe'"));
  run = testing_util::RunCommand({HMC_COORDINATOR_PATH, "--insecure", "--world_size=2",
                                  "--tls_cert=" + TempPath("absent.pem")},
                                 absl::Seconds(30));
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("tls_cert, tls_key and tls_ca go together"));
  EXPECT_THAT(run.output, Not(HasSubstr("listening")));
}

TEST(Hmcrun, AnUnreachableSshHostIsReportedWithItsRank) {
  if (access("/usr/bin/ssh", X_OK) != 0) GTEST_SKIP() << "needs ssh";
  // Port 1 on loopback: nothing listens there.
  const std::string inventory = WriteInventory(
      "unreachable.ini", "[x]\nh ansible_host=127.0.0.1 ansible_connection=ssh ansible_port=1\n");
  Outcome run = Hmcrun({"-hosts", inventory, "/bin/true"}, absl::Seconds(60));
  EXPECT_EQ(run.code, 255) << run.output;
  EXPECT_THAT(run.output, HasSubstr("[0 x h] ssh: connect to host 127.0.0.1 port 1"));
  EXPECT_THAT(run.output, HasSubstr("rank 0 (h, " + inventory + ":2) exited with status 255"));
}

// -x names travel into the ssh ranks' remote shell, so anything but a variable name is refused;
// --token is blanked from hmcrun's own command line once parsed (ps, /proc/PID/cmdline).
TEST(Hmcrun, RefusesAnExportThatIsNoNameAndHidesTheTokenFromItsCommandLine) {
  Outcome bad = Hmcrun({"-x", "A;touch /tmp/hmc-x;B=1", "/bin/true"});
  EXPECT_NE(bad.code, 0);
  EXPECT_THAT(bad.output, HasSubstr("'A;touch /tmp/hmc-x;B' is not an environment variable name"));
  Outcome run = Hmcrun({"-np", "1", "--token", "sekrit-value", "/bin/sh", "-c",
                        "tr '\\0' ' ' < /proc/$PPID/cmdline; echo"});
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--token ************ /bin/sh"));
  EXPECT_THAT(run.output, Not(HasSubstr("sekrit")));
}

TEST(Hmcrun, DryRunPrintsEachCommandWithoutTheToken) {
  Outcome run = Hmcrun({"--dry-run", "--token", "s3cret", "/bin/true"});
  EXPECT_EQ(run.code, 0);
  EXPECT_THAT(run.output, HasSubstr("[2 zone-b peer-b] "));
  EXPECT_THAT(run.output, HasSubstr("HMC_TOKEN=<token>"));
  EXPECT_FALSE(absl::StrContains(run.output, "s3cret"));
}

// A real sshd on a loopback port, with a generated host key and client key, stopped by PID.
class HmcrunOverSsh : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || access("/usr/sbin/sshd", X_OK) != 0 ||
        access("/usr/bin/ssh", X_OK) != 0) {
      GTEST_SKIP() << "needs root, sshd and ssh (Debian's openssh-server)";
    }
    dir_ = TempPath("ssh");
    ASSERT_EQ(system(absl::StrCat("rm -rf ", dir_, " && mkdir -p ", dir_, " /run/sshd && ",
                                  "ssh-keygen -q -t ed25519 -N '' -f ", dir_, "/host_key && ",
                                  "ssh-keygen -q -t ed25519 -N '' -f ", dir_, "/client_key && ",
                                  "cp ", dir_, "/client_key.pub ", dir_, "/authorized_keys")
                         .c_str()),
              0);
    port_ = 20000 + getpid() % 20000;
    std::ofstream(dir_ + "/sshd_config")
        << "ListenAddress 127.0.0.1:" << port_ << "\nHostKey " << dir_ << "/host_key\n"
        << "AuthorizedKeysFile " << dir_ << "/authorized_keys\nPidFile " << dir_ << "/sshd.pid\n"
        << "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\n"
        << "StrictModes no\nAcceptEnv none\n";
    auto p = Process::Spawn({"/usr/sbin/sshd", "-D", "-e", "-f", dir_ + "/sshd_config"}, {},
                            {.output_path = dir_ + "/sshd.log"});
    ASSERT_TRUE(p.ok()) << p.status();
    sshd_.emplace(std::move(*p));
    // Ready once it accepts a login (bounded).
    const std::string probe = absl::StrCat(
        "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
        "-o LogLevel=ERROR -i ",
        dir_, "/client_key -p ", port_, " root@127.0.0.1 true 2>/dev/null");
    bool ready = false;
    for (int i = 0; i < 50 && !ready; ++i) {
      ready = system(probe.c_str()) == 0;
      if (!ready) absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_TRUE(ready) << ReadFile(dir_ + "/sshd.log");
  }
  void TearDown() override {
    if (sshd_.has_value()) {
      sshd_->Signal(SIGTERM);
      EXPECT_TRUE(sshd_->Wait(absl::Now() + absl::Seconds(10)).ok());
    }
  }
  std::string Inventory(int ranks) {
    return WriteInventory(
        "ssh.ini",
        absl::StrCat("[loop]\nlo ansible_host=127.0.0.1 ansible_connection=ssh ansible_user=root "
                     "ansible_port=",
                     port_, " slots=", ranks, " ansible_ssh_private_key_file=", dir_,
                     "/client_key ansible_ssh_common_args=\"-o StrictHostKeyChecking=no "
                     "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR\"\n"));
  }

  std::string dir_;
  int port_ = 0;
  std::optional<Process> sshd_;
};

TEST_F(HmcrunOverSsh, RanksStartedOverSshFormAGroup) {
  Outcome run = Hmcrun({"-hosts", Inventory(3), HMC_HELLO_PATH, "--count=65537"});
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("[2 loop lo] rank 2/3 (zone loop): allreduce of 65537 floats "
                                    "correct"));
}

TEST_F(HmcrunOverSsh, RemoteStatusComesBackAndStoppingHmcrunStopsRemoteRanks) {
  // The program's path on the remote side comes from --remote-path.
  Outcome run = Hmcrun(
      {"-hosts", Inventory(1), "--remote-path", "/bin/sh", "/nonexistent/sh", "-c", "exit 9"});
  EXPECT_EQ(run.code, 9) << run.output;
  const std::string pids = TempPath("ssh_pids");
  const std::string output = TempPath("ssh_term.out");
  auto p = Process::Spawn({HMC_HMCRUN_PATH, "-hosts", Inventory(2), "/bin/sh", "-c",
                           absl::StrCat("echo $$ >> ", pids, "; exec sleep 60")},
                          {}, {.output_path = output});
  ASSERT_TRUE(p.ok());
  std::vector<std::string> lines;
  // Generous bounds: under the whole suite on two cores this test once failed with 10 s for the
  // ranks to start and 5 s for them to stop (alone, each takes a second or two).
  for (int i = 0; i < 600 && lines.size() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    lines = absl::StrSplit(ReadFile(pids), '\n', absl::SkipEmpty());
  }
  ASSERT_EQ(lines.size(), 2u) << ReadFile(output);
  p->Signal(SIGINT);
  absl::StatusOr<int> code = p->Wait(absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 128 + SIGINT) << ReadFile(output);
  for (const std::string& line : lines) {
    int pid;
    ASSERT_TRUE(absl::SimpleAtoi(line, &pid));
    bool gone = false;
    for (int i = 0; i < 300 && !gone; ++i) {
      gone = !Alive(pid);
      if (!gone) absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_TRUE(gone) << "remote rank " << pid << " still runs";
  }
}

}  // namespace
}  // namespace hmc
