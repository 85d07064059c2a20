#ifndef HMC_COLLECTIVES_AVERAGING_H_
#define HMC_COLLECTIVES_AVERAGING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectives/average_outcome.h"
#include "collectives/state_transfer.h"
#include "collectives/work.h"

namespace hmc {

// Fault-tolerant averaging rounds (Communicator::Average). A round is one weighted all-reduce
// attempt in the current epoch followed by a commit vote (every member says it holds the whole
// sum: one extra round trip). A rank whose vote completes commits. When a member fails, survivors
// may stand in different places: some committed, some hold the sum but missed a vote, some never
// got the sum. So the first exchange of every new epoch (the reconciliation) shares each member's
// standing, and every member derives the same verdict from the same standings: commit where any
// member committed or every member holds the sum of the same attempt; otherwise retry the round in
// the new epoch (the survivors' weights), or give up after kMaxAverageAttempts attempts. A rank
// that took part in a reconciliation no longer commits by a vote of an older epoch, so votes and
// verdicts never disagree.

inline constexpr uint32_t kMaxAverageAttempts = 2;

// Where one rank stands, as the reconciliation exchanges it.
struct RoundStanding {
  uint64_t committed = 0;      // Rounds this rank committed.
  bool in_round = false;       // Inside Average for round `committed`.
  bool complete = false;       // Its latest attempt left the whole sum on this rank.
  uint32_t attempt_epoch = 0;  // The epoch of that attempt.
  uint32_t attempts = 0;       // Attempts of the open round so far.
  // A rank that joined a running group and has not been through a reconciliation: it has no
  // rounds of its own, and takes the group's count from its first one (RoundsAfter).
  bool newcomer = false;

  static constexpr size_t kWireBytes = 24;
  void Encode(uint8_t* out) const;
  static RoundStanding Decode(const uint8_t* in);
};

enum class RoundVerdict : uint8_t { kNone, kCommit, kRetry, kGiveUp };
const char* RoundVerdictName(RoundVerdict verdict);

// The verdict on the open round of the member at `self`, from every member's standing (kNone when
// it has none open). Every member gets a consistent verdict from the same standings; an error
// means standings that the protocol cannot produce.
absl::StatusOr<RoundVerdict> DecideRound(const std::vector<RoundStanding>& members, int self);
// How many rounds the group will have committed once every member applied its verdict: the
// count a newcomer starts from.
uint64_t RoundsAfter(const std::vector<RoundStanding>& members);

// This rank's averaging state, guarded by its communicator.
struct RoundLedger {
  RoundStanding standing;
  uint32_t reconciled_epoch = 0;  // The newest epoch whose reconciliation read `standing`.
  // The newest verdict, the epoch it was reached in and the round it was about.
  RoundVerdict verdict = RoundVerdict::kNone;
  uint32_t verdict_epoch = 0;
  uint64_t verdict_round = 0;
  // Who contributed to the attempt that left the whole sum here, and their weights.
  std::vector<int> contributors;
  std::vector<double> weights;
};

// What an averaging round hands the all-reduce of one part of an attempt (the round's buffer
// comes in parts, average_round.h), and what the closing part hands back. Every part's argument
// check carries the round; the part that closes the attempt (the last) also takes every member's
// weight from its check, transfers the shared state to stale members before its data, and votes
// once the earlier parts' all-reduces left their sums here.
struct AveragingAttempt {
  uint64_t round = 0;
  double weight = 0;
  const SharedState* state = nullptr;  // The round's `state`; null: none.
  bool stale = false;                  // This rank downloads `state` in this attempt.
  uint32_t part = 0;                   // The part's index in the round (compared).
  bool closes = true;                  // The last part (compared).
  // The closing part: the attempt's earlier parts, whose sums its vote stands for.
  std::vector<std::shared_ptr<Work>> earlier;
  std::vector<double> weights;  // The closing part: every member's, by dense rank.
  StateDownload download;       // The closing part: what this rank downloaded, if it was stale.
  bool committed = false;       // The closing part: the vote committed the round.
};

// The closing part, before its vote: waits for the attempt's earlier parts; whether every one
// left its sum here. Where one did not, every member's closing part skips the vote alike (the
// failure was the argument check's verdict) or the attempt's epoch ends.
bool EarlierPartsSummed(const AveragingAttempt& closing);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_AVERAGING_H_
