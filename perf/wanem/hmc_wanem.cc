// hmc-wanem: a multi-host WAN on one Linux machine.
//
//   hmc-wanem up perf/topologies/us-eu.topo [--prefix=hmcw] [--seed=1] [--scale=0.15] [--mtu=1500]
//   hmc-wanem exec us-0 [--prefix=hmcw] -- build/bin/hello_allreduce
//   hmc-wanem status [--prefix=hmcw]
//   hmc-wanem cut us eu | heal us eu | degrade us-0 eu-0 [--loss=0.02] [--rate=50]
//   hmc-wanem down [--prefix=hmcw]
//
// `up` gives every host of the topology its own network namespace (PREFIX-HOST) with a TUN
// interface and the address 10.201.x.y, and starts a background emulator process that forwards
// IP packets between the TUN devices as the topology's link model says (delay, jitter, loss,
// path capacity, per-flow cap, NIC rates). Every name it creates starts with the prefix, so
// `down` also removes what a crashed run left. State lives in /run/hmc-wanem/PREFIX/.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "launcher/process.h"
#include "perf/wanem/forwarder.h"
#include "perf/wanem/topology.h"
#include "perf/wanem/tun.h"

namespace hmc::wanem {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

struct Args {
  std::string command;
  std::vector<std::string> positional;
  std::vector<std::string> rest;  // After "--".
  std::string prefix = "hmcw";
  uint64_t seed = 1;
  double scale = 1;  // Multiplies the topology's own scale.
  // The emulated interfaces' MTU. The forwarder's cost is per packet, so jumbo frames (as cloud
  // VPCs allow: 8896 on Google Cloud, 9001 on AWS) raise the rate it sustains several times.
  int mtu = 1500;
  double loss = -1;      // degrade: the links' loss; negative: the topology's.
  double rate_mbit = 0;  // degrade: each flow's cap, Mbit/s; 0: the topology's.
};

std::string StateDir(const std::string& prefix) { return "/run/hmc-wanem/" + prefix; }
std::string Namespace(const std::string& prefix, const std::string& host) {
  return prefix + "-" + host;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a command (no shell), its output to `log`; the error quotes the output.
absl::Status Run(const std::vector<std::string>& argv, const std::string& log) {
  absl::StatusOr<Process> p = Process::Spawn(argv, {}, {.output_path = log});
  if (!p.ok()) return p.status();
  absl::StatusOr<int> code = p->Wait(absl::Now() + absl::Seconds(30));
  if (!code.ok()) return code.status();
  if (*code != 0) {
    std::string command;
    for (const std::string& a : argv) absl::StrAppend(&command, a, " ");
    return absl::InternalError(
        absl::StrFormat("'%s' failed (%d): %s", command, *code, ReadFile(log)));
  }
  return absl::OkStatus();
}

std::vector<std::string> Namespaces(const std::string& prefix) {
  const std::string log = absl::StrCat("/tmp/hmc-wanem-", getpid(), ".list");
  std::vector<std::string> found;
  if (Run({"ip", "netns", "list"}, log).ok()) {
    for (absl::string_view line : absl::StrSplit(ReadFile(log), '\n')) {
      const std::string name(line.substr(0, line.find(' ')));
      if (absl::StartsWith(name, prefix + "-")) found.push_back(name);
    }
  }
  std::remove(log.c_str());
  return found;
}

// Stops the emulator and removes every namespace and state file of the prefix; returns how many
// namespaces it removed.
int RemoveAll(const std::string& prefix) {
  const std::string dir = StateDir(prefix);
  int pid = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(dir + "/pid")), &pid) && pid > 0) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 100 && kill(pid, 0) == 0; ++i) usleep(50000);
    if (kill(pid, 0) == 0) kill(pid, SIGKILL);
  }
  int removed = 0;
  for (const std::string& ns : Namespaces(prefix)) {
    if (Run({"ip", "netns", "del", ns}, "/dev/null").ok()) ++removed;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return removed;
}

int Down(const Args& a) {
  std::printf("hmc-wanem: down (%d namespaces removed)\n", RemoveAll(a.prefix));
  return 0;
}

// The emulator process: creates the TUN devices, places them in the namespaces, reports through
// `ready` and forwards until SIGTERM.
int Emulate(const Topology& topology, LinkModel model, const Args& a, int ready) {
  const std::string dir = StateDir(a.prefix);
  const std::string log = dir + "/ip.log";
  auto fail = [&](const absl::Status& s) {
    const std::string message(s.message());
    const ssize_t ignored = write(ready, message.data(), message.size());
    (void)ignored;
    return 1;
  };
  std::vector<UniqueFd> tuns;
  for (size_t i = 0; i < topology.hosts.size(); ++i) {
    const std::string ns = Namespace(a.prefix, topology.hosts[i].name);
    const std::string tun = absl::StrCat(a.prefix, "t", i);
    absl::StatusOr<UniqueFd> fd = CreateTun(tun);
    if (!fd.ok()) return fail(fd.status());
    tuns.push_back(std::move(*fd));
    for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
             {"ip", "netns", "add", ns},
             {"ip", "link", "set", tun, "netns", ns},
             {"ip", "-n", ns, "addr", "add", HostAddress(static_cast<int>(i)) + "/16", "dev", tun},
             {"ip", "-n", ns, "link", "set", tun, "mtu", absl::StrCat(a.mtu)},
             {"ip", "-n", ns, "link", "set", tun, "up"},
             {"ip", "-n", ns, "link", "set", "lo", "up"}}) {
      if (absl::Status s = Run(argv, log); !s.ok()) return fail(s);
    }
  }
  std::ofstream(dir + "/pid") << getpid() << "\n";
  const ssize_t ignored = write(ready, "ok", 2);
  (void)ignored;
  close(ready);
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  Forwarder forwarder(std::move(model), std::move(tuns));
  absl::Status s = forwarder.Run(g_stop, dir + "/counters", dir + "/control");
  if (!s.ok()) std::fprintf(stderr, "hmc-wanem: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}

int Up(const Args& a) {
  if (a.positional.size() != 1) {
    std::fprintf(stderr,
                 "usage: hmc-wanem up TOPOLOGY [--prefix=P] [--seed=N] [--scale=F] [--mtu=N]\n");
    return 2;
  }
  absl::StatusOr<Topology> topology = LoadTopology(a.positional[0]);
  if (!topology.ok()) {
    std::fprintf(stderr, "hmc-wanem: %s\n", std::string(topology.status().message()).c_str());
    return 1;
  }
  topology->scale *= a.scale;
  absl::StatusOr<LinkModel> model = LinkModel::Create(*topology, a.seed, a.mtu);
  if (!model.ok()) {
    std::fprintf(stderr, "hmc-wanem: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const std::string dir = StateDir(a.prefix);
  if (std::filesystem::exists(dir + "/pid")) {
    std::fprintf(stderr, "hmc-wanem: '%s' is already up; run 'hmc-wanem down --prefix=%s'\n",
                 a.prefix.c_str(), a.prefix.c_str());
    return 1;
  }
  RemoveAll(a.prefix);  // Leftovers of a crashed run with this prefix.
  std::filesystem::create_directories(dir);
  {
    std::ofstream hosts(dir + "/hosts");
    for (size_t i = 0; i < topology->hosts.size(); ++i) {
      const Host& h = topology->hosts[i];
      hosts << h.name << ' ' << h.region << ' ' << HostAddress(static_cast<int>(i)) << ' '
            << Namespace(a.prefix, h.name) << '\n';
    }
  }
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return 1;
  std::fflush(stdout);  // The child must not print this process's buffered output again.
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    setsid();
    const std::string log = dir + "/emulator.log";
    freopen(log.c_str(), "a", stdout);
    freopen(log.c_str(), "a", stderr);
    _exit(Emulate(*topology, std::move(*model), a, pipe_fds[1]));
  }
  close(pipe_fds[1]);
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) answer.append(buffer, n);
  close(pipe_fds[0]);
  if (answer != "ok") {
    std::fprintf(stderr, "hmc-wanem: starting the emulator failed: %s\n", answer.c_str());
    RemoveAll(a.prefix);
    return 1;
  }
  std::printf("hmc-wanem: %zu hosts up (emulator pid %d, state in %s)\n", topology->hosts.size(),
              pid, dir.c_str());
  std::printf("%s", ReadFile(dir + "/hosts").c_str());
  return 0;
}

int Exec(const Args& a) {
  if (a.positional.size() != 1 || a.rest.empty()) {
    std::fprintf(stderr, "usage: hmc-wanem exec HOST [--prefix=P] -- COMMAND [ARGS...]\n");
    return 2;
  }
  std::vector<std::string> argv = {"ip", "netns", "exec", Namespace(a.prefix, a.positional[0])};
  argv.insert(argv.end(), a.rest.begin(), a.rest.end());
  std::vector<char*> c_argv;
  for (std::string& s : argv) c_argv.push_back(s.data());
  c_argv.push_back(nullptr);
  execvp("ip", c_argv.data());
  std::perror("hmc-wanem: exec ip");
  return 127;
}

// The host indexes (line numbers of the state's hosts file) a name stands for: a host, or every
// host of a region.
std::vector<int> HostsNamed(const std::string& hosts_file, const std::string& name) {
  std::vector<int> found;
  int index = 0;
  for (absl::string_view line : absl::StrSplit(hosts_file, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() >= 2 && (fields[0] == name || fields[1] == name)) found.push_back(index);
    ++index;
  }
  return found;
}

// cut, heal and degrade: rewrites the control file (forwarder.h) and waits until the running
// emulator applied it.
int Control(const Args& a) {
  if (a.positional.size() != 2) {
    std::fprintf(stderr, "usage: hmc-wanem %s A B [--prefix=P]%s  (A, B: hosts or regions)\n",
                 a.command.c_str(), a.command == "degrade" ? " [--loss=F] [--rate=MBIT]" : "");
    return 2;
  }
  const std::string dir = StateDir(a.prefix);
  const std::string hosts = ReadFile(dir + "/hosts");
  const std::vector<int> from = HostsNamed(hosts, a.positional[0]);
  const std::vector<int> to = HostsNamed(hosts, a.positional[1]);
  if (hosts.empty() || from.empty() || to.empty()) {
    std::fprintf(stderr, "hmc-wanem: no host or region '%s' in '%s' (is it up?)\n",
                 (from.empty() ? a.positional[0] : a.positional[1]).c_str(), a.prefix.c_str());
    return 1;
  }
  // The overrides in force: (from, to) -> (loss, flow bits/s).
  const std::string control = dir + "/control";
  std::map<std::pair<int, int>, std::pair<double, double>> overrides;
  uint64_t generation = 0;
  {
    std::istringstream in(ReadFile(control));
    std::string word;
    in >> word >> generation;
    int f, t;
    double loss, bps;
    while (in >> f >> t >> loss >> bps) overrides[{f, t}] = {loss, bps};
  }
  int changed = 0;
  for (int f : from) {
    for (int t : to) {
      if (f == t) continue;
      for (const auto& pair : {std::make_pair(f, t), std::make_pair(t, f)}) {
        if (a.command == "heal") {
          overrides.erase(pair);
        } else if (a.command == "cut") {
          overrides[pair] = {1.0, 0};
        } else {
          overrides[pair] = {a.loss, a.rate_mbit * 1e6};
        }
        ++changed;
      }
    }
  }
  ++generation;
  {
    std::ofstream out(control + ".tmp");
    out << "generation " << generation << '\n';
    for (const auto& [pair, value] : overrides) {
      out << pair.first << ' ' << pair.second << ' ' << value.first << ' ' << value.second << '\n';
    }
  }
  std::rename((control + ".tmp").c_str(), control.c_str());
  for (int i = 0; i < 100; ++i) {
    uint64_t applied = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(control + ".applied")), &applied) &&
        applied >= generation) {
      std::printf("hmc-wanem: %s %s <-> %s (%d directions)\n", a.command.c_str(),
                  a.positional[0].c_str(), a.positional[1].c_str(), changed);
      return 0;
    }
    usleep(20000);
  }
  std::fprintf(stderr, "hmc-wanem: the emulator of '%s' did not apply the change (is it up?)\n",
               a.prefix.c_str());
  return 1;
}

int Status(const Args& a) {
  const std::string dir = StateDir(a.prefix);
  int pid = 0;
  const bool up = absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(dir + "/pid")), &pid) &&
                  pid > 0 && kill(pid, 0) == 0;
  std::printf("hmc-wanem '%s': %s\n", a.prefix.c_str(),
              up ? absl::StrFormat("up, emulator pid %d", pid).c_str() : "down");
  std::printf("%s%s", ReadFile(dir + "/hosts").c_str(), ReadFile(dir + "/counters").c_str());
  return up ? 0 : 1;
}

}  // namespace
}  // namespace hmc::wanem

int main(int argc, char** argv) {
  using hmc::wanem::Args;
  Args a;
  bool after_dashes = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (after_dashes) {
      a.rest.push_back(arg);
    } else if (arg == "--") {
      after_dashes = true;
    } else if (absl::StartsWith(arg, "--prefix=")) {
      a.prefix = arg.substr(9);
    } else if (absl::StartsWith(arg, "--seed=")) {
      if (!absl::SimpleAtoi(arg.substr(7), &a.seed)) return 2;
    } else if (absl::StartsWith(arg, "--scale=")) {
      if (!absl::SimpleAtod(arg.substr(8), &a.scale) || a.scale <= 0) return 2;
    } else if (absl::StartsWith(arg, "--mtu=")) {
      if (!absl::SimpleAtoi(arg.substr(6), &a.mtu) || a.mtu < 576 || a.mtu > 65000) {
        std::fprintf(stderr, "hmc-wanem: --mtu must be 576 to 65000\n");
        return 2;
      }
    } else if (absl::StartsWith(arg, "--loss=")) {
      if (!absl::SimpleAtod(arg.substr(7), &a.loss) || a.loss < 0 || a.loss > 1) {
        std::fprintf(stderr, "hmc-wanem: --loss must be 0 to 1\n");
        return 2;
      }
    } else if (absl::StartsWith(arg, "--rate=")) {
      if (!absl::SimpleAtod(arg.substr(7), &a.rate_mbit) || a.rate_mbit <= 0) {
        std::fprintf(stderr, "hmc-wanem: --rate must be a positive Mbit/s\n");
        return 2;
      }
    } else if (a.command.empty()) {
      a.command = arg;
    } else {
      a.positional.push_back(arg);
    }
  }
  if (a.prefix.empty() || a.prefix.size() > 8) {
    std::fprintf(stderr, "hmc-wanem: --prefix must have 1 to 8 characters\n");
    return 2;
  }
  if (a.command == "up") return hmc::wanem::Up(a);
  if (a.command == "down") return hmc::wanem::Down(a);
  if (a.command == "exec") return hmc::wanem::Exec(a);
  if (a.command == "status") return hmc::wanem::Status(a);
  if (a.command == "cut" || a.command == "heal" || a.command == "degrade") {
    return hmc::wanem::Control(a);
  }
  std::fprintf(stderr,
               "usage: hmc-wanem up TOPOLOGY | exec HOST -- CMD... | status | cut A B | heal A B "
               "| degrade A B [--loss=F] [--rate=MBIT] | down [--prefix=P]\n");
  return 2;
}
