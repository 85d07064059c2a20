// hmc-fault: the fault harness's long runs. For each fault type, runs --trials trials (a group of
// --ranks ranks of hmc-fault-rank on loopback averaging --rounds rounds, one fault at a random
// moment on a random rank) and prints, per fault type: hangs, inconsistent rounds, lost committed
// rounds, and the recovery time (fault -> next round every survivor committed) as median, 90th
// percentile and maximum. Exits 1 if any trial hung, disagreed or lost a round.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "perf/fault/fault_trial.h"

ABSL_FLAG(std::string, faults, "kill,stop,coordinator",
          "Fault types, comma-separated (none, kill, stop, coordinator; cut needs namespaces: "
          "tests/fault/link_cut_test.cc).");
ABSL_FLAG(int, trials, 10, "Trials per fault type.");
ABSL_FLAG(int, ranks, 4, "Ranks per trial.");
ABSL_FLAG(int, rounds, 20, "Averaging rounds per trial.");
ABSL_FLAG(int64_t, count, 1 << 16, "Floats per vector.");
ABSL_FLAG(absl::Duration, pause, absl::Milliseconds(20), "Pause between rounds.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(2), "The group's heartbeat timeout.");
ABSL_FLAG(absl::Duration, stop_for, absl::Seconds(4), "How long a stopped rank stays stopped.");
ABSL_FLAG(uint32_t, seed, 1, "Seed of the first trial (each trial adds one).");
ABSL_FLAG(std::string, work_dir, "/tmp", "Where the ranks' output goes.");
ABSL_FLAG(bool, verbose, false, "Print every trial's problems.");

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::printf("# %d ranks, %d rounds of %lld floats, pause %s, heartbeat timeout %s\n",
              absl::GetFlag(FLAGS_ranks), absl::GetFlag(FLAGS_rounds),
              static_cast<long long>(absl::GetFlag(FLAGS_count)),
              absl::FormatDuration(absl::GetFlag(FLAGS_pause)).c_str(),
              absl::FormatDuration(absl::GetFlag(FLAGS_heartbeat_timeout)).c_str());
  std::printf(
      "| fault | trials | faults after the last round (no trial) | hangs | inconsistent rounds | "
      "lost committed rounds | recovery median s | p90 s | max s |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
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
    int hangs = 0, inconsistent = 0, lost = 0, too_late = 0;
    std::vector<double> recovery;
    for (int t = 0; t < absl::GetFlag(FLAGS_trials); ++t) {
      hmc::fault::TrialSpec spec;
      spec.rank_binary = HMC_FAULT_RANK_PATH;
      spec.work_dir = absl::GetFlag(FLAGS_work_dir);
      spec.ranks = absl::GetFlag(FLAGS_ranks);
      spec.rounds = absl::GetFlag(FLAGS_rounds);
      spec.count = absl::GetFlag(FLAGS_count);
      spec.pause = absl::GetFlag(FLAGS_pause);
      spec.fault = *kind;
      spec.seed = seed++;
      spec.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
      spec.stop_for = absl::GetFlag(FLAGS_stop_for);
      absl::StatusOr<hmc::fault::TrialResult> r = hmc::fault::RunTrial(spec);
      if (!r.ok()) {
        std::fprintf(stderr, "hmc-fault: trial %d: %s\n", t, r.status().ToString().c_str());
        return 2;
      }
      hangs += r->hang ? 1 : 0;
      too_late += r->too_late ? 1 : 0;
      inconsistent += r->inconsistent;
      lost += r->lost;
      if (r->recovery < absl::InfiniteDuration()) {
        recovery.push_back(absl::ToDoubleSeconds(r->recovery));
      }
      if (absl::GetFlag(FLAGS_verbose) || r->hang || r->inconsistent > 0 || r->lost > 0) {
        for (const std::string& p : r->problems) {
          std::fprintf(stderr, "%s trial %d (seed %u, victim %d): %s\n", name.c_str(), t, spec.seed,
                       r->victim, p.c_str());
        }
      }
    }
    clean &= hangs == 0 && inconsistent == 0 && lost == 0 && too_late == 0;
    std::printf("| %s | %d | %d | %d | %d | %d | %.2f | %.2f | %.2f |\n", name.c_str(),
                absl::GetFlag(FLAGS_trials), too_late, hangs, inconsistent, lost,
                Percentile(recovery, 0.5), Percentile(recovery, 0.9), Percentile(recovery, 1.0));
    std::fflush(stdout);
  }
  return clean ? 0 : 1;
}
