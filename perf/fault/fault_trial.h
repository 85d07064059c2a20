#ifndef HMC_PERF_FAULT_FAULT_TRIAL_H_
#define HMC_PERF_FAULT_FAULT_TRIAL_H_

// One trial of the fault harness: a coordinator and N ranks of hmc-fault-rank averaging rounds on
// loopback, one fault injected at a random moment, and every rank's committed rounds checked
// against each other and against the weighted average of the contributors they name.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hmc::fault {

enum class FaultKind {
  kNone,  // No fault: the baseline.
  kKill,  // SIGKILL: a crashed or preempted machine.
  kStop,  // SIGSTOP, then SIGCONT after `stop_for`: a machine that hangs (or is paused) a while.
  kCut,   // TrialSpec::cut: the links of `cut_off` ranks stop carrying anything, silently.
  kCoordinator,  // The coordinator goes away: every rank must go on with the membership it has.
  // The coordinator goes away and is restarted at the same address; once it has rebuilt the group
  // from the ranks that came back, a random rank is killed, which the new coordinator handles.
  kCoordinatorRestart,
  kJoin,     // A new rank joins the running group (one more than it started with).
  kReplace,  // SIGKILL, then a new rank joins in the victim's place, as a restarted spot VM would.
};
const char* FaultName(FaultKind kind);
absl::StatusOr<FaultKind> ParseFault(const std::string& name);

struct TrialSpec {
  std::string rank_binary;  // hmc-fault-rank.
  std::string work_dir;     // Where the ranks' output goes.
  int ranks = 4;
  int rounds = 20;
  int64_t count = 1 << 16;  // Floats per vector.
  // Floats of state the ranks keep in step and a joiner downloads (hmc-fault-rank --state); 0:
  // none. Every rank's state after each round must be the same.
  int64_t state = 0;
  // Probe the links when the group forms (Options::probe); every survivor must then end with the
  // same measured links, a joiner's included.
  bool probe = false;
  // The fault (kill or stop) lands while the group is being created: once the victim says that it
  // measures its links (needs probe), not after every rank committed two rounds.
  bool at_creation = false;
  absl::Duration pause = absl::Milliseconds(20);
  int parts = 1;                  // hmc-fault-rank --parts: each round's vector in this many parts.
  std::string transport = "tcp";  // Options::transport of every rank.
  FaultKind fault = FaultKind::kKill;
  int victim = -1;  // -1: chosen at random.
  uint32_t seed = 1;
  absl::Duration heartbeat_timeout = absl::Seconds(2);
  absl::Duration stop_for = absl::Seconds(4);
  absl::Duration limit = absl::Seconds(120);  // A rank still running then is a hang.
  // Where the coordinator listens, and the heartbeat timeout it applies (zero: the one above).
  std::string coordinator_bind = "127.0.0.1:0";
  std::string coordinator_netns;  // The network namespace it listens in; empty: this one.
  absl::Duration coordinator_heartbeat_timeout = absl::ZeroDuration();
  // Run before each rank's command (e.g. "ip netns exec NS"); none when empty.
  std::function<std::vector<std::string>(int rank)> rank_prefix;
  // kCut: cuts the links, and the ranks it cuts off (they may fail; they must not hang).
  std::function<void()> cut;
  std::vector<int> cut_off;
};

struct TrialResult {
  int victim = -1;       // The rank a kill or stop hit; the first rank cut off.
  bool hang = false;     // A rank that should have finished had not by the limit.
  int inconsistent = 0;  // Rounds whose reports differ, or differ from the expected average.
  int lost = 0;          // Rounds some surviving rank did not commit (a joiner: from its first on).
  // Ranks the fault did not hit that ended with an error: the group removed a healthy member, or
  // it gave up. They are no survivors, so their rounds count in neither `lost` nor `rounds`.
  int failed = 0;
  // The victim had finished every round before the fault, or (at_creation) its Create had
  // returned: no trial.
  bool too_late = false;
  int rounds = 0;   // Rounds committed by every survivor.
  int retried = 0;  // Rounds that some rank committed only in a second attempt.
  // With probe: survivors whose links at the end were unmeasured, or differ from another's.
  int links_unknown = 0;
  // From the fault to the next round every survivor committed (a fault that changes the
  // membership: in a later epoch than before the fault; with a joiner, one it took part in);
  // infinite without a fault.
  absl::Duration recovery = absl::InfiniteDuration();
  std::vector<std::string> problems;  // What went wrong, for people.

  // No hang, no rank the fault did not hit failed, no round inconsistent or lost.
  bool Clean() const { return !hang && failed == 0 && inconsistent == 0 && lost == 0; }
};

absl::StatusOr<TrialResult> RunTrial(const TrialSpec& spec);

}  // namespace hmc::fault

#endif  // HMC_PERF_FAULT_FAULT_TRIAL_H_
