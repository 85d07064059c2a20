// hmcrun: starts one program as a group of ranks on the hosts of an inventory.
//   hmcrun [-hosts FILE] [-np N] [launcher options] [--OPTION=VALUE…] PROGRAM [ARGS…]
// See `hmcrun --help` and the README's "hmcrun" section.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "collectives/allreduce_algorithms.h"
#include "collectives/options.h"
#include "launcher/coordinator_host.h"
#include "launcher/group_runner.h"
#include "launcher/inventory.h"
#include "launcher/local_group.h"
#include "launcher/process.h"
#include "launcher/rank_command.h"

namespace hmc {
namespace {

constexpr char kUsage[] =
    R"(usage: hmcrun [-hosts FILE] [-np N] [options] [--OPTION=VALUE...] PROGRAM [ARGS...]

Starts PROGRAM once per slot of the inventory's hosts (or the first N slots), hosting the
coordinator, and prefixes every output line with [rank zone host].

  -hosts FILE, -hostfile FILE  Ansible INI inventory (groups are zones; slots=, gpus=, zone=,
                               netns=, ansible_host/user/port/connection) or MPI hostfile
                               ("host slots=N"). Default: the built-in examples/inventory.local
                               (four local ranks in two zones).
  -np N                        Ranks to start (default: every slot).
  -np MIN:MAX                  Elastic: start up to MAX ranks (the slots there are); the group
                               forms with the first MIN, the others join it, and it trains on
                               while MIN ranks live (hmc options world_size=MIN, min_ranks=MIN;
                               the coordinator admits up to MAX).
  --restart=on-failure         Start a rank that failed again (it joins the running group as a
                               new rank); a rank that exits 0 is finished. The coordinator then
                               runs as a process of its own (hmc-coordinator, next to hmcrun),
                               started again at its address when it fails. Default: no.
  --max-restarts N             Restarts per rank (default 3); all ranks together: N times the
                               ranks, or --max-total-restarts.
  --coordinator HOST:PORT      Join a running coordinator instead of hosting one.
  --coordinator-bind HOST:PORT Where the hosted coordinator listens (default: chosen, see README).
  --token TOKEN                Shared secret (default: $HMC_TOKEN, else a random one). Prefer
                               HMC_TOKEN: a command line is visible to every user until hmcrun
                               blanks it, a moment after it starts.
  --timeout DURATION           Kill every rank after this long (default 24h), exit 124.
  --remote-path PATH           The program's path on ssh hosts (default: the same path).
  -x NAME[=VALUE]              Pass an environment variable to every rank.
  --dry-run                    Print each rank's command and environment; start nothing.
  --OPTION=VALUE               Any hmc option (see the README's table), for every rank.

All-reduce algorithms (--algo=NAME; default auto, the tuner):
)";

struct LaunchArgs {
  std::string hosts;
  int np = 0;      // The ranks to start (MAX of -np MIN:MAX); 0: every slot.
  int np_min = 0;  // MIN of -np MIN:MAX; 0: not elastic.
  bool restart_on_failure = false;
  int max_restarts = 3;
  int max_total_restarts = 0;
  std::string coordinator;
  std::string coordinator_bind;
  std::string token;
  absl::Duration timeout = absl::Hours(24);
  std::string remote_path;
  std::vector<std::string> extra_env;
  bool dry_run = false;
  std::vector<std::string> program;
};

int Fail(absl::string_view message) {
  std::fprintf(stderr, "hmcrun: %.*s\n", static_cast<int>(message.size()), message.data());
  return 2;
}

// Each launcher flag that takes a value: its names and what it does with the value.
using ValueFlag = std::function<absl::Status(LaunchArgs&, const std::string&)>;

// A flag that stores its value as it is.
ValueFlag Store(std::string LaunchArgs::*field) {
  return [field](LaunchArgs& a, const std::string& v) {
    a.*field = v;
    return absl::OkStatus();
  };
}

const std::map<std::string, ValueFlag>& ValueFlags() {
  static const auto* flags = new std::map<std::string, ValueFlag>{
      {"hosts", Store(&LaunchArgs::hosts)},
      {"hostfile", Store(&LaunchArgs::hosts)},
      {"coordinator", Store(&LaunchArgs::coordinator)},
      {"coordinator-bind", Store(&LaunchArgs::coordinator_bind)},
      {"token", Store(&LaunchArgs::token)},
      {"remote-path", Store(&LaunchArgs::remote_path)},
      {"x",
       [](LaunchArgs& a, const std::string& v) {
         // The name reaches a remote shell (ssh ranks): only a variable name may be one.
         const std::string name = v.substr(0, v.find('='));
         if (!IsVariableName(name)) {
           return absl::InvalidArgumentError(absl::StrFormat(
               "-x %s: '%s' is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", v,
               name));
         }
         if (absl::StrContains(v, '=')) {
           a.extra_env.push_back(v);
         } else if (const char* inherited = std::getenv(v.c_str()); inherited != nullptr) {
           a.extra_env.push_back(absl::StrCat(v, "=", inherited));
         }
         return absl::OkStatus();
       }},
      {"np",
       [](LaunchArgs& a, const std::string& v) {
         const std::vector<std::string> range = absl::StrSplit(v, ':');
         const bool parsed = range.size() == 1
                                 ? absl::SimpleAtoi(range[0], &a.np)
                                 : range.size() == 2 && absl::SimpleAtoi(range[0], &a.np_min) &&
                                       absl::SimpleAtoi(range[1], &a.np);
         if (!parsed || a.np < 1 || (range.size() == 2 && (a.np_min < 1 || a.np_min > a.np))) {
           return absl::InvalidArgumentError(
               absl::StrCat("-np ", v, ": expected a positive count N or a range MIN:MAX"));
         }
         return absl::OkStatus();
       }},
      {"restart",
       [](LaunchArgs& a, const std::string& v) {
         if (v != "on-failure" && v != "no") {
           return absl::InvalidArgumentError(
               absl::StrCat("--restart=", v, ": expected on-failure or no"));
         }
         a.restart_on_failure = v == "on-failure";
         return absl::OkStatus();
       }},
      {"max-restarts",
       [](LaunchArgs& a, const std::string& v) {
         if (!absl::SimpleAtoi(v, &a.max_restarts) || a.max_restarts < 0) {
           return absl::InvalidArgumentError(
               absl::StrCat("--max-restarts ", v, ": expected a count"));
         }
         return absl::OkStatus();
       }},
      {"max-total-restarts",
       [](LaunchArgs& a, const std::string& v) {
         if (!absl::SimpleAtoi(v, &a.max_total_restarts) || a.max_total_restarts < 0) {
           return absl::InvalidArgumentError(
               absl::StrCat("--max-total-restarts ", v, ": expected a count"));
         }
         return absl::OkStatus();
       }},
      {"timeout",
       [](LaunchArgs& a, const std::string& v) {
         if (!absl::ParseDuration(v, &a.timeout) || a.timeout <= absl::ZeroDuration()) {
           return absl::InvalidArgumentError(
               absl::StrCat("--timeout ", v, ": expected a duration such as 90s or 10m"));
         }
         return absl::OkStatus();
       }},
  };
  return *flags;
}

// Launcher flags, then hmc options (--NAME=VALUE), up to the program; -flag and --flag alike,
// with the value after `=` or as the next argument.
absl::Status ParseArgs(int argc, char** argv, LaunchArgs& args, Options& options) {
  std::vector<std::string> option_flags;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string flag = argv[i];
    if (!absl::StartsWith(flag, "-")) break;
    if (flag == "--") {
      ++i;
      break;
    }
    std::string name = absl::StartsWith(flag, "--") ? flag.substr(2) : flag.substr(1);
    std::optional<std::string> value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (name == "help" || name == "h") {
      std::fputs(kUsage, stdout);
      std::fputs(DescribeAllReduceAlgorithms().c_str(), stdout);
      std::exit(0);
    }
    if (name == "dry-run") {
      args.dry_run = true;
      continue;
    }
    auto setter = ValueFlags().find(name == "n" ? "np" : name);
    if (setter == ValueFlags().end()) {
      if (!value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag, " (see --help)"));
      }
      option_flags.push_back(absl::StrCat("--", name, "=", *value));
      continue;
    }
    const bool inline_value = value.has_value();
    if (!value.has_value()) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
      value = argv[++i];
    }
    if (absl::Status s = setter->second(args, *value); !s.ok()) return s;
    if (name == "token") {
      // Out of this process's command line (/proc/PID/cmdline, ps) from now on; HMC_TOKEN never
      // shows there at all.
      char* text = inline_value ? std::strchr(argv[i], '=') + 1 : argv[i];
      std::memset(text, '*', std::strlen(text));
    }
  }
  for (; i < argc; ++i) args.program.push_back(argv[i]);
  if (args.program.empty()) return absl::InvalidArgumentError("no program given (see --help)");
  absl::StatusOr<std::vector<std::string>> rest = options.ApplyFlags(option_flags);
  if (!rest.ok()) return rest.status();
  if (!rest->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown option ", (*rest)[0], " (see the README's option table)"));
  }
  // Before any rank starts: each would refuse it alike.
  if (absl::Status s = CheckAllReduceAlgorithmOption(options.algo); !s.ok()) return s;
  return absl::OkStatus();
}

// The rank's environment: every hmc option (with the host's hmc_* variables applied), where it
// sits, and the -x variables.
absl::StatusOr<std::vector<std::string>> RankEnvironment(const RankPlacement& p, Options options,
                                                         const LaunchArgs& args) {
  for (const auto& [key, value] : p.host->vars) {
    if (!absl::StartsWith(key, "hmc_")) continue;
    if (absl::Status s = options.Set(key.substr(4), value); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(p.host->where, ": host ", p.host->name, ": ", s.message()));
    }
  }
  options.rank = p.rank;
  options.zone = p.host->zone;
  options.local_rank = p.local_rank;
  options.local_size = p.local_size;
  std::vector<std::string> env = options.ToEnvironment();
  env.push_back(absl::StrCat("HMC_HOST=", p.host->name));
  env.push_back(absl::StrCat("HMC_GPUS=", p.host->gpus));
  // Whether a person watches hmcrun's output (the examples then show progress lines).
  env.push_back(absl::StrCat("HMC_TERMINAL=", isatty(STDOUT_FILENO) == 1 ? 1 : 0));
  env.insert(env.end(), args.extra_env.begin(), args.extra_env.end());
  return env;
}

std::string Describe(const RankCommand& command) {
  std::vector<std::string> words;
  for (const std::string& e : command.env) {
    words.push_back(absl::StartsWith(e, "HMC_TOKEN=") ? "HMC_TOKEN=<token>" : ShellQuote(e));
  }
  for (const std::string& a : command.argv) words.push_back(ShellQuote(a));
  return absl::StrJoin(words, " ");
}

// The coordinator: the one named by --coordinator; under --restart=on-failure a process of its
// own, restarted when it dies (a crash there must not end the job); otherwise served from this
// process (`hosted`).
absl::Status StartCoordinator(const LaunchArgs& args, const std::vector<RankPlacement>& placements,
                              const Options& options, const char* argv0, HostedCoordinator& hosted,
                              std::optional<ServiceProcess>& coordinator_process) {
  absl::StatusOr<CoordinatorConfig> config = CoordinatorConfigFor(options);
  if (!config.ok()) return config.status();
  config->max_ranks = static_cast<int>(placements.size());
  if (!args.coordinator.empty()) {
    hosted.address = args.coordinator;
  } else if (args.dry_run) {
    hosted.address = "<coordinator hosted by hmcrun>";
  } else if (args.restart_on_failure) {
    absl::StatusOr<CoordinatorPlacement> placement =
        PlaceCoordinator(placements, args.coordinator_bind);
    if (!placement.ok()) return placement.status();
    const std::string program = absl::StrCat(
        std::filesystem::path(SelfExecutable(argv0)).parent_path().string(), "/hmc-coordinator");
    absl::StatusOr<CoordinatorProcess> process =
        StartCoordinatorProcess(program, *placement, *config);
    if (!process.ok()) return process.status();
    hosted.address = process->address;
    coordinator_process.emplace(ServiceProcess{.name = "the coordinator",
                                               .process = std::move(process->process),
                                               .restart = std::move(process->restart)});
  } else {
    absl::StatusOr<HostedCoordinator> started =
        HostCoordinator(placements, *config, args.coordinator_bind);
    if (!started.ok()) return started.status();
    hosted = std::move(*started);
  }
  return absl::OkStatus();
}

// Every rank's command (over ssh, in a namespace or here), label and name.
absl::StatusOr<std::vector<RankProcess>> RankProcesses(const std::vector<RankPlacement>& placements,
                                                       const Options& options,
                                                       const LaunchArgs& args) {
  char cwd[PATH_MAX] = {};
  RemoteSettings remote{.remote_path = args.remote_path,
                        .working_dir = getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ""};
  std::vector<std::string> program = args.program;
  if (absl::StrContains(program[0], '/') && !absl::StartsWith(program[0], "/")) {
    char resolved[PATH_MAX];
    if (realpath(program[0].c_str(), resolved) != nullptr) program[0] = resolved;
  }
  std::vector<RankProcess> ranks;
  for (const RankPlacement& p : placements) {
    absl::StatusOr<std::vector<std::string>> env = RankEnvironment(p, options, args);
    if (!env.ok()) return env.status();
    ranks.push_back(
        {.command = BuildRankCommand(*p.host, program, *env, remote),
         .label = absl::StrFormat("[%d %s %s]", p.rank, p.host->zone, p.host->name),
         .name = absl::StrFormat("rank %d (%s, %s)", p.rank, p.host->name, p.host->where)});
  }
  return ranks;
}

int Main(int argc, char** argv) {
  absl::StatusOr<Options> options = Options::FromEnvironment();
  if (!options.ok()) return Fail(options.status().message());
  LaunchArgs args;
  if (absl::Status s = ParseArgs(argc, argv, args, *options); !s.ok()) return Fail(s.message());
  RaiseDescriptorLimit();  // Output pipes and the hosted coordinator's connections, per rank.
  absl::StatusOr<Inventory> inventory =
      args.hosts.empty() ? ParseInventory(DefaultInventoryText(), "(built-in inventory.local)")
                         : LoadInventory(args.hosts);
  if (!inventory.ok()) return Fail(inventory.status().message());
  absl::StatusOr<std::vector<RankPlacement>> placements = PlaceRanks(*inventory, args.np);
  if (!placements.ok()) return Fail(placements.status().message());
  const int started = static_cast<int>(placements->size());
  // Elastic: the first epoch forms with MIN ranks; the others join it.
  const int world_size = args.np_min > 0 ? std::min(args.np_min, started) : started;
  if (!args.token.empty()) options->token = args.token;
  if (options->token.empty()) options->token = RandomToken();
  options->world_size = world_size;
  if (args.np_min > 0) options->min_ranks = world_size;

  HostedCoordinator hosted;
  std::optional<ServiceProcess> coordinator_process;
  if (absl::Status s =
          StartCoordinator(args, *placements, *options, argv[0], hosted, coordinator_process);
      !s.ok()) {
    return Fail(s.message());
  }
  options->coordinator = hosted.address;

  absl::StatusOr<std::vector<RankProcess>> ranks = RankProcesses(*placements, *options, args);
  if (!ranks.ok()) return Fail(ranks.status().message());
  if (args.dry_run) {
    for (const RankProcess& r : *ranks)
      std::printf("%s %s\n", r.label.c_str(), Describe(r.command).c_str());
    return 0;
  }
  std::set<const InventoryHost*> hosts_used;
  for (const RankPlacement& p : *placements) hosts_used.insert(p.host);
  std::fprintf(
      stderr, "hmcrun: %d ranks on %zu hosts, coordinator %s%s%s\n", started, hosts_used.size(),
      hosted.address.c_str(),
      coordinator_process.has_value()
          ? absl::StrFormat(" (pid %d)", coordinator_process->process.pid()).c_str()
          : "",
      args.np_min > 0 ? absl::StrFormat(" (elastic: %d to %d)", world_size, started).c_str() : "");
  absl::StatusOr<int> status = RunRanks(std::move(*ranks),
                                        {.timeout = args.timeout,
                                         .restart_on_failure = args.restart_on_failure,
                                         .max_restarts = args.max_restarts,
                                         .max_total_restarts = args.max_total_restarts,
                                         .min_running = args.np_min},
                                        std::move(coordinator_process));
  if (!status.ok()) {
    Fail(status.status().message());
    return absl::IsDeadlineExceeded(status.status()) ? 124 : 1;
  }
  return *status;
}

}  // namespace
}  // namespace hmc

int main(int argc, char** argv) { return hmc::Main(argc, argv); }
