#include "perf/fault/fault_trial.h"

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "collectives/options.h"
#include "core/auth.h"
#include "core/coordinator.h"
#include "launcher/coordinator_host.h"
#include "launcher/local_group.h"
#include "launcher/process.h"
#include "perf/fault/averaging_rounds.h"

namespace hmc::fault {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<CommittedRound> CommittedRounds(const std::string& output,
                                            std::vector<std::string>& problems, int rank) {
  std::vector<CommittedRound> rounds;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, "committed ")) continue;
    absl::StatusOr<CommittedRound> r = CommittedRound::Parse(std::string(line));
    if (r.ok()) {
      rounds.push_back(*r);
    } else {
      problems.push_back(absl::StrFormat("rank %d: %s", rank, r.status().message()));
    }
  }
  return rounds;
}

int64_t HighestRound(const std::string& output) {
  int64_t highest = -1;
  std::vector<std::string> ignored;
  for (const CommittedRound& r : CommittedRounds(output, ignored, 0)) {
    highest = std::max<int64_t>(highest, static_cast<int64_t>(r.round));
  }
  return highest;
}

}  // namespace

const char* FaultName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kNone:
      return "none";
    case FaultKind::kKill:
      return "kill";
    case FaultKind::kStop:
      return "stop";
    case FaultKind::kCut:
      return "cut";
    case FaultKind::kCoordinator:
      return "coordinator";
    case FaultKind::kCoordinatorRestart:
      return "coordinator-restart";
    case FaultKind::kJoin:
      return "join";
    case FaultKind::kReplace:
      return "replace";
  }
  return "unknown";
}

absl::StatusOr<FaultKind> ParseFault(const std::string& name) {
  for (FaultKind kind : {FaultKind::kNone, FaultKind::kKill, FaultKind::kStop, FaultKind::kCut,
                         FaultKind::kCoordinator, FaultKind::kCoordinatorRestart, FaultKind::kJoin,
                         FaultKind::kReplace}) {
    if (name == FaultName(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown fault '%s' (none, kill, stop, cut, coordinator, coordinator-restart, join, "
      "replace)",
      name));
}

absl::StatusOr<TrialResult> RunTrial(const TrialSpec& spec) {
  if (spec.at_creation &&
      (!spec.probe || (spec.fault != FaultKind::kKill && spec.fault != FaultKind::kStop))) {
    return absl::InvalidArgumentError("a fault at creation is a kill or a stop, with probe");
  }
  if (spec.fault == FaultKind::kCut && (!spec.cut || spec.cut_off.empty())) {
    return absl::InvalidArgumentError("a cut needs the links to cut and the ranks it cuts off");
  }
  std::mt19937 random(spec.seed);
  TrialResult result;
  std::vector<int> victims;  // Ranks the fault hits, which need not finish.
  if (spec.fault == FaultKind::kCut) {
    victims = spec.cut_off;
  } else if (spec.fault == FaultKind::kKill || spec.fault == FaultKind::kStop ||
             spec.fault == FaultKind::kCoordinatorRestart || spec.fault == FaultKind::kReplace) {
    victims.push_back(spec.victim >= 0 ? spec.victim : static_cast<int>(random() % spec.ranks));
  }
  result.victim = victims.empty() ? -1 : victims.front();
  auto is_victim = [&](int r) {
    return std::find(victims.begin(), victims.end(), r) != victims.end();
  };
  CoordinatorConfig config;
  config.world_size = spec.ranks;
  config.max_ranks = spec.ranks + (spec.fault == FaultKind::kJoin ? 1 : 0);
  config.token = RandomToken();
  config.bind = spec.coordinator_bind;
  config.heartbeat_timeout = spec.coordinator_heartbeat_timeout > absl::ZeroDuration()
                                 ? spec.coordinator_heartbeat_timeout
                                 : spec.heartbeat_timeout;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator =
      spec.coordinator_netns.empty() ? Coordinator::Start(config)
                                     : StartCoordinatorInNamespace(spec.coordinator_netns, config);
  if (!coordinator.ok()) return coordinator.status();
  Options options;
  options.coordinator = (*coordinator)->address().ToString();
  options.token = config.token;
  options.world_size = spec.ranks;
  options.streams = 2;  // No stream probe: a trial starts in a fraction of a second.
  options.probe = spec.probe;
  options.transport = spec.transport;
  options.heartbeat_interval = absl::Milliseconds(250);
  options.heartbeat_timeout = spec.heartbeat_timeout;
  options.timeout = absl::Seconds(60);
  std::vector<Process> ranks;
  std::vector<std::string> outputs;
  // Process r runs rank r; a joiner is the process after the first spec.ranks (its id is the
  // coordinator's to give).
  auto spawn = [&](int r) -> absl::Status {
    options.rank = r < spec.ranks ? r : -1;
    outputs.push_back(absl::StrFormat("%s/fault_rank%d_%d.log", spec.work_dir, r, getpid()));
    std::vector<std::string> argv =
        spec.rank_prefix ? spec.rank_prefix(r) : std::vector<std::string>{};
    for (const std::string& arg :
         {spec.rank_binary, absl::StrCat("--rounds=", spec.rounds),
          absl::StrCat("--count=", spec.count),
          absl::StrCat("--pause=", absl::FormatDuration(spec.pause)),
          absl::StrCat("--state=", spec.state), absl::StrCat("--parts=", spec.parts)}) {
      argv.push_back(arg);
    }
    absl::StatusOr<Process> p =
        Process::Spawn(argv, options.ToEnvironment(), {.output_path = outputs.back()});
    if (!p.ok()) return p.status();
    ranks.push_back(std::move(*p));
    return absl::OkStatus();
  };
  for (int r = 0; r < spec.ranks; ++r) {
    if (absl::Status s = spawn(r); !s.ok()) return s;
  }
  const absl::Time limit = absl::Now() + spec.limit;
  // The fault lands at a random moment after every rank committed two rounds, or while the victim
  // measures its links at creation: in its first 10 ms, since the whole takes a few tens on
  // loopback (with up to 50 ms, 4 trials in 10 hit a victim that had already measured).
  int64_t fault_ms = 0;
  if (spec.fault != FaultKind::kNone) {
    auto ready = [&] {
      if (spec.at_creation) {
        return absl::StrContains(ReadAll(outputs[result.victim]), "measuring its links");
      }
      for (const std::string& output : outputs) {
        if (HighestRound(ReadAll(output)) < 1) return false;
      }
      return true;
    };
    while (!ready() && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(10));
    absl::SleepFor(
        spec.at_creation
            ? absl::Milliseconds(random() % 10)
            : absl::Milliseconds(random() % (3 * absl::ToInt64Milliseconds(spec.pause) + 1)));
    fault_ms = absl::ToUnixMillis(absl::Now());
    // A fault after the last round proves nothing: the trial must fail rather than pass.
    auto still_running = [&](int r) {
      int code;
      if (!ranks[r].Poll(&code)) return true;
      result.problems.push_back(absl::StrFormat("rank %d had finished before the fault", r));
      result.too_late = true;
      return false;
    };
    if (spec.fault == FaultKind::kCut) {
      spec.cut();
    } else if (spec.fault == FaultKind::kCoordinator) {
      coordinator->reset();  // Its connections close: every rank loses it at once.
    } else if (spec.fault == FaultKind::kCoordinatorRestart) {
      config.bind = (*coordinator)->address().ToString();
      coordinator->reset();
      absl::SleepFor(absl::Milliseconds(random() % 500));
      coordinator = spec.coordinator_netns.empty()
                        ? Coordinator::Start(config)
                        : StartCoordinatorInNamespace(spec.coordinator_netns, config);
      if (!coordinator.ok()) return coordinator.status();
      while ((*coordinator)->table().epoch == 0 && absl::Now() < limit) {
        absl::SleepFor(absl::Milliseconds(10));
      }
      if (still_running(result.victim)) ranks[result.victim].Signal(SIGKILL);
    } else if (spec.fault == FaultKind::kJoin) {
      if (absl::Status s = spawn(spec.ranks); !s.ok()) return s;
    } else {
      if (still_running(result.victim)) {
        ranks[result.victim].Signal(spec.fault == FaultKind::kStop ? SIGSTOP : SIGKILL);
      }
      if (spec.fault == FaultKind::kReplace) {
        if (absl::Status s = spawn(spec.ranks); !s.ok()) return s;
      }
    }
    if (spec.fault == FaultKind::kStop) {
      absl::SleepFor(spec.stop_for);
      ranks[result.victim].Signal(SIGCONT);
    }
  }
  const int processes = static_cast<int>(ranks.size());
  std::vector<int> codes(processes, -1);
  for (int r = 0; r < processes; ++r) {
    absl::StatusOr<int> code = ranks[r].Wait(limit);
    if (code.ok()) {
      codes[r] = *code;
    } else {
      result.hang = true;
      result.problems.push_back(absl::StrFormat("rank %d still running at the limit", r));
    }
  }
  for (Process& p : ranks) p.Signal(SIGKILL);  // Those still running; reaped by ~Process.
  // Survivors: every rank but the victim must commit every round; a stopped victim may too.
  std::map<uint64_t, std::vector<std::pair<int, CommittedRound>>> by_round;
  std::vector<int> survivors;
  std::vector<uint64_t> first_round(processes, 0);  // A joiner owes the rounds from its first.
  std::map<uint64_t, std::vector<std::pair<int, uint64_t>>> state_by_round;  // (rank, hash)
  std::vector<std::pair<int, std::string>> links_lines;  // (rank, "links ..."), with probe.
  for (int r = 0; r < processes; ++r) {
    const std::string output = ReadAll(outputs[r]);
    const bool victim = is_victim(r);
    const bool finished = codes[r] == 0;
    if (!victim && !finished && codes[r] != -1) {
      ++result.failed;
      result.problems.push_back(
          absl::StrFormat("rank %d exited %d:\n%s", r, codes[r],
                          output.substr(output.size() > 2000 ? output.size() - 2000 : 0)));
    }
    if (victim && spec.fault == FaultKind::kStop && codes[r] != 0 && codes[r] != kExitRemoved) {
      result.problems.push_back(absl::StrFormat("stopped rank %d exited %d", r, codes[r]));
    }
    if (finished) survivors.push_back(r);
    if (victim && spec.at_creation && absl::StrContains(output, "joined id=")) {
      result.too_late = true;  // Its Create returned before the fault: it tested nothing new.
      result.problems.push_back(absl::StrFormat("rank %d was created before the fault", r));
    }
    std::vector<CommittedRound> committed = CommittedRounds(output, result.problems, r);
    if (r >= spec.ranks) {
      first_round[r] = committed.empty() ? spec.rounds : committed.front().round;
      if (committed.empty()) {
        result.problems.push_back(absl::StrFormat("the joining rank committed no round"));
      }
    }
    for (const CommittedRound& c : committed) {
      if (r >= spec.ranks && std::none_of(c.contributors.begin(), c.contributors.end(),
                                          [&](int id) { return id >= spec.ranks; })) {
        ++result.inconsistent;
        result.problems.push_back(
            absl::StrFormat("the joining rank committed round %d without being a member", c.round));
      }
      by_round[c.round].push_back({r, c});
    }
    for (absl::string_view line : absl::StrSplit(output, '\n')) {
      if (spec.probe && finished && absl::StartsWith(line, "links ")) {
        links_lines.emplace_back(r, std::string(line));
      }
      if (!absl::StartsWith(line, "state ")) continue;
      absl::StatusOr<std::pair<uint64_t, uint64_t>> state = ParseStateLine(std::string(line));
      if (state.ok()) state_by_round[state->first].emplace_back(r, state->second);
    }
  }
  for (int round = 0; round < spec.rounds; ++round) {
    const auto& reports = by_round[round];
    int committed_by_survivors = 0, owed = 0;
    for (int s : survivors) {
      if (static_cast<uint64_t>(round) < first_round[s]) continue;
      ++owed;
      committed_by_survivors += std::count_if(reports.begin(), reports.end(),
                                              [&](const auto& e) { return e.first == s; });
    }
    if (committed_by_survivors != owed) {
      ++result.lost;
      result.problems.push_back(absl::StrFormat("round %d: committed by %d of %d survivors", round,
                                                committed_by_survivors, owed));
    } else if (!survivors.empty()) {
      ++result.rounds;
    }
    if (std::any_of(reports.begin(), reports.end(),
                    [](const auto& e) { return e.second.attempts > 1; })) {
      ++result.retried;
    }
    bool consistent = true;
    // Every report must name the first one's contributors and weights, so one reference serves
    // them all (it sums a quarter million floats per contributor).
    const uint64_t expected_hash = reports.empty()
                                       ? 0
                                       : ExpectedHash(round, reports.front().second.contributors,
                                                      reports.front().second.weights, spec.count);
    for (const auto& [rank, c] : reports) {
      const CommittedRound& first = reports.front().second;
      consistent &= c.epoch == first.epoch && c.contributors == first.contributors &&
                    c.weights == first.weights && c.hash == first.hash;
      for (size_t i = 0; i < c.contributors.size() && i < c.weights.size(); ++i) {
        // With state, a joiner adds nothing to the round in which it downloads the state.
        const bool downloading = spec.state > 0 && c.contributors[i] >= spec.ranks;
        consistent &= c.weights[i] == RoundWeight(c.contributors[i], round) ||
                      (downloading && c.weights[i] == 0);
      }
      consistent &= c.contributors.size() == c.weights.size() && c.hash == expected_hash;
      if (!consistent) {
        result.problems.push_back(
            absl::StrFormat("round %d: rank %d reports %s", round, rank, c.ToLine()));
        break;
      }
    }
    for (const auto& [rank, hash] : state_by_round[round]) {
      if (hash == state_by_round[round].front().second) continue;
      consistent = false;
      result.problems.push_back(absl::StrFormat("round %d: rank %d's state differs from rank %d's",
                                                round, rank, state_by_round[round].front().first));
      break;
    }
    if (!consistent) ++result.inconsistent;
  }
  for (const auto& [rank, line] : links_lines) {
    if (!absl::StrContains(line, " measured=1 ") || line != links_lines.front().second) {
      ++result.links_unknown;
      result.problems.push_back(absl::StrFormat("rank %d ended with '%s', rank %d with '%s'", rank,
                                                line, links_lines.front().first,
                                                links_lines.front().second));
    }
  }
  if (spec.probe && links_lines.size() != survivors.size()) {
    ++result.links_unknown;
    result.problems.push_back("a survivor did not report its links");
  }
  if (fault_ms > 0) {
    // Rounds that were in flight when the fault struck may still commit with the victim's part:
    // a fault that changes the membership is over at the first round of a later epoch.
    uint32_t epoch_at_fault = 0;
    for (const auto& [round, reports] : by_round) {
      for (const auto& [rank, c] : reports) {
        if (c.unix_ms < fault_ms) epoch_at_fault = std::max(epoch_at_fault, c.epoch);
      }
    }
    const bool changes_membership = spec.fault != FaultKind::kCoordinator;
    // The slowest survivor's first commit after the fault.
    absl::Duration slowest = absl::ZeroDuration();
    for (int s : survivors) {
      int64_t first = -1;
      for (const auto& [round, reports] : by_round) {
        for (const auto& [rank, c] : reports) {
          if (rank == s && c.unix_ms >= fault_ms && (first < 0 || c.unix_ms < first) &&
              (!changes_membership || c.epoch > epoch_at_fault)) {
            first = c.unix_ms;
          }
        }
      }
      slowest = first < 0 ? absl::InfiniteDuration()
                          : std::max(slowest, absl::Milliseconds(first - fault_ms));
    }
    result.recovery = slowest;
  }
  return result;
}

}  // namespace hmc::fault
