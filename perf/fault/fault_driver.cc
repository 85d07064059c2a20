// hmc-fault: the fault harness's long runs. For each fault type, runs --trials trials (a group of
// --ranks ranks of hmc-fault-rank on loopback averaging --rounds rounds, one fault at a random
// moment on a random rank) and prints, per fault type: hangs, ranks the fault did not hit that
// failed, inconsistent rounds, lost committed rounds, and the recovery time (fault -> next round
// every survivor committed) as median, 90th percentile and maximum. Exits 1 if any trial hung,
// failed a rank the fault did not hit, disagreed or lost a round.
//
// With --wanem_prefix the ranks run on the hosts of a running hmc-wanem (spread over its hosts in
// order, the coordinator on the first host), over the emulated WAN; `cut` then cuts the victim's
// host off from every other with hmc-wanem cut, and heals it after the trial.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "launcher/process.h"
#include "perf/fault/fault_trial.h"

ABSL_FLAG(std::string, faults, "kill,stop,coordinator",
          "Fault types, comma-separated (none, kill, stop, coordinator, coordinator-restart, join, "
          "replace; cut with --wanem_prefix).");
ABSL_FLAG(int64_t, state, 0, "Floats of state the ranks keep in step and joiners download.");
ABSL_FLAG(std::string, wanem_prefix, "",
          "Run the ranks on the hosts of this running hmc-wanem (see the top of this file).");
ABSL_FLAG(absl::Duration, limit, absl::Seconds(120), "A rank still running then is a hang.");
ABSL_FLAG(int, trials, 10, "Trials per fault type.");
ABSL_FLAG(int, ranks, 4, "Ranks per trial.");
ABSL_FLAG(int, rounds, 20, "Averaging rounds per trial.");
ABSL_FLAG(int64_t, count, 1 << 16, "Floats per vector.");
ABSL_FLAG(absl::Duration, pause, absl::Milliseconds(20), "Pause between rounds.");
ABSL_FLAG(int, parts, 1, "Parts each round's vector comes in (hmc-fault-rank --parts).");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(2), "The group's heartbeat timeout.");
ABSL_FLAG(absl::Duration, stop_for, absl::Seconds(4), "How long a stopped rank stays stopped.");
ABSL_FLAG(uint32_t, seed, 1, "Seed of the first trial (each trial adds one).");
ABSL_FLAG(std::string, work_dir, "/tmp", "Where the ranks' output goes.");
ABSL_FLAG(bool, verbose, false, "Print every trial's problems.");
ABSL_FLAG(std::string, transport, "tcp",
          "The ranks' transport (Options::transport: tcp, ucx, ofi, or per link class).");
ABSL_FLAG(bool, at_creation, false,
          "Kills and stops land while the group measures its links at creation (the ranks "
          "probe their links), not after two rounds.");

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// An emulated host: its name, address and network namespace.
struct EmulatedHost {
  std::string name, address, netns;
};

std::vector<EmulatedHost> EmulatedHosts(const std::string& prefix) {
  std::vector<EmulatedHost> hosts;
  std::ifstream in("/run/hmc-wanem/" + prefix + "/hosts");
  std::string name, region, address, netns;
  while (in >> name >> region >> address >> netns) hosts.push_back({name, address, netns});
  return hosts;
}

// hmc-wanem cut or heal between `host` and every other emulated host.
void CutOrHeal(const std::string& prefix, const std::string& command, const std::string& host,
               const std::vector<EmulatedHost>& hosts) {
  for (const EmulatedHost& other : hosts) {
    if (other.name == host) continue;
    absl::StatusOr<hmc::Process> p =
        hmc::Process::Spawn({HMC_WANEM_PATH, command, host, other.name, "--prefix=" + prefix}, {},
                            {.output_path = "/dev/null"});
    if (p.ok()) p->Wait(absl::Now() + absl::Seconds(10)).IgnoreError();
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string prefix = absl::GetFlag(FLAGS_wanem_prefix);
  const std::vector<EmulatedHost> hosts =
      prefix.empty() ? std::vector<EmulatedHost>{} : EmulatedHosts(prefix);
  if (!prefix.empty() && hosts.empty()) {
    std::fprintf(stderr, "hmc-fault: no hmc-wanem '%s' is up\n", prefix.c_str());
    return 2;
  }
  std::printf(
      "# %d ranks, %d rounds of %lld floats, pause %s, heartbeat timeout %s, state %lld "
      "floats, %s, transport %s\n",
      absl::GetFlag(FLAGS_ranks), absl::GetFlag(FLAGS_rounds),
      static_cast<long long>(absl::GetFlag(FLAGS_count)),
      absl::FormatDuration(absl::GetFlag(FLAGS_pause)).c_str(),
      absl::FormatDuration(absl::GetFlag(FLAGS_heartbeat_timeout)).c_str(),
      static_cast<long long>(absl::GetFlag(FLAGS_state)),
      prefix.empty() ? "loopback" : ("hmc-wanem " + prefix).c_str(),
      absl::GetFlag(FLAGS_transport).c_str());
  std::printf(
      "| fault | trials | faults after the last round (no trial) | hangs "
      "| ranks not hit that failed | inconsistent rounds | lost committed rounds "
      "| rounds tried twice | recovery median s | p90 s | max s |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  bool clean = true;
  uint32_t seed = absl::GetFlag(FLAGS_seed);
  const std::vector<std::string> faults =
      absl::StrSplit(absl::GetFlag(FLAGS_faults), ',', absl::SkipEmpty());
  for (const std::string& name : faults) {
    absl::StatusOr<hmc::fault::FaultKind> kind = hmc::fault::ParseFault(name);
    if (!kind.ok()) {
      std::fprintf(stderr, "hmc-fault: %s\n", kind.status().ToString().c_str());
      return 2;
    }
    int hangs = 0, failed = 0, inconsistent = 0, lost = 0, too_late = 0, retried = 0;
    std::vector<double> recovery;
    for (int t = 0; t < absl::GetFlag(FLAGS_trials); ++t) {
      hmc::fault::TrialSpec spec;
      spec.rank_binary = HMC_FAULT_RANK_PATH;
      spec.work_dir = absl::GetFlag(FLAGS_work_dir);
      spec.ranks = absl::GetFlag(FLAGS_ranks);
      spec.rounds = absl::GetFlag(FLAGS_rounds);
      spec.count = absl::GetFlag(FLAGS_count);
      spec.pause = absl::GetFlag(FLAGS_pause);
      spec.parts = absl::GetFlag(FLAGS_parts);
      spec.transport = absl::GetFlag(FLAGS_transport);
      spec.fault = *kind;
      spec.seed = seed++;
      spec.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
      spec.stop_for = absl::GetFlag(FLAGS_stop_for);
      spec.state = absl::GetFlag(FLAGS_state);
      spec.limit = absl::GetFlag(FLAGS_limit);
      spec.at_creation = absl::GetFlag(FLAGS_at_creation);
      spec.probe = spec.at_creation;
      std::string cut_host;
      if (!hosts.empty()) {
        const int n = static_cast<int>(hosts.size());
        // Ranks spread over the hosts in order (four ranks on the four continents' eight hosts:
        // one per region); a joiner goes to the first host.
        auto host_of = [n, ranks = spec.ranks](int rank) { return rank * n / ranks % n; };
        spec.coordinator_bind = hosts[0].address + ":0";
        spec.coordinator_netns = hosts[0].netns;
        spec.rank_prefix = [&hosts, host_of](int rank) {
          return std::vector<std::string>{"ip", "netns", "exec", hosts[host_of(rank)].netns};
        };
        if (*kind == hmc::fault::FaultKind::kCut) {
          // A rank not on the coordinator's host, and every rank on its host.
          const int victim = 1 + static_cast<int>(spec.seed % (spec.ranks - 1));
          cut_host = hosts[host_of(victim)].name;
          for (int r = 0; r < spec.ranks; ++r) {
            if (host_of(r) == host_of(victim)) spec.cut_off.push_back(r);
          }
          spec.cut = [&, cut_host] { CutOrHeal(prefix, "cut", cut_host, hosts); };
        }
      }
      absl::StatusOr<hmc::fault::TrialResult> r = hmc::fault::RunTrial(spec);
      if (!cut_host.empty()) CutOrHeal(prefix, "heal", cut_host, hosts);
      if (!r.ok()) {
        std::fprintf(stderr, "hmc-fault: trial %d: %s\n", t, r.status().ToString().c_str());
        return 2;
      }
      hangs += r->hang ? 1 : 0;
      failed += r->failed;
      too_late += r->too_late ? 1 : 0;
      inconsistent += r->inconsistent;
      lost += r->lost;
      retried += r->retried;
      if (r->recovery < absl::InfiniteDuration()) {
        recovery.push_back(absl::ToDoubleSeconds(r->recovery));
      }
      clean &= r->Clean() && !r->too_late;
      if (absl::GetFlag(FLAGS_verbose) || !r->Clean()) {
        for (const std::string& p : r->problems) {
          std::fprintf(stderr, "%s trial %d (seed %u, victim %d): %s\n", name.c_str(), t, spec.seed,
                       r->victim, p.c_str());
        }
      }
    }
    std::printf("| %s | %d | %d | %d | %d | %d | %d | %d | %.2f | %.2f | %.2f |\n", name.c_str(),
                absl::GetFlag(FLAGS_trials), too_late, hangs, failed, inconsistent, lost, retried,
                Percentile(recovery, 0.5), Percentile(recovery, 0.9), Percentile(recovery, 1.0));
    std::fflush(stdout);
  }
  return clean ? 0 : 1;
}
