#ifndef HMC_PERF_FAULT_AVERAGING_ROUNDS_H_
#define HMC_PERF_FAULT_AVERAGING_ROUNDS_H_

// What the fault harness's ranks average, and how a round's outcome is written and checked. The
// rank (hmc-fault-rank) and the checker (fault_trial) share only these definitions: the checker
// computes each round's expected result itself, from the contributors a rank names.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hmc::fault {

// Rank `id`'s vector in round `round`: multiples of 1/4 below 16, so that every weighted sum of
// a few of them is exact in float and the average is one rounding of an exact quotient.
float RoundValue(int id, uint64_t round, size_t i);
void FillRound(int id, uint64_t round, std::vector<float>& values);
// Rank `id`'s weight in round `round` (1 to 4: samples differ between ranks).
double RoundWeight(int id, uint64_t round);
// FNV-1a of the vector's bytes.
uint64_t HashFloats(const std::vector<float>& values);

// hmc-fault-rank's exit code when the group removed it (a rank stopped past the heartbeat
// timeout), and when a round failed otherwise.
inline constexpr int kExitRemoved = 4;
inline constexpr int kExitRoundFailed = 3;

// One committed round as a rank reports it: a line "committed round=R epoch=E attempts=A
// contributors=0,1,3 weights=1,2,4 hash=H unix_ms=T".
struct CommittedRound {
  uint64_t round = 0;
  uint32_t epoch = 0;
  int attempts = 0;
  std::vector<int> contributors;
  std::vector<double> weights;
  uint64_t hash = 0;
  int64_t unix_ms = 0;

  std::string ToLine() const;
  static absl::StatusOr<CommittedRound> Parse(const std::string& line);
};

// The hash of the exact weighted average of `contributors`' vectors of `count` elements, with
// the weights a round reports (a joiner adds weight 0 in the round that downloads the state).
uint64_t ExpectedHash(uint64_t round, const std::vector<int>& contributors,
                      const std::vector<double>& weights, size_t count);

// The state the ranks keep in step when the harness runs with state: it starts at
// InitialState on every rank of the first epoch, and each committed round adds the round's
// average to it. A joiner starts elsewhere and must download it. A line "state round=R hash=H"
// reports it after round R.
float InitialState(int id, size_t i, bool joiner);
void AddRound(const std::vector<float>& average, std::vector<float>& state);
std::string StateLine(uint64_t round, uint64_t hash);
// Round and hash of a state line; error if it is not one.
absl::StatusOr<std::pair<uint64_t, uint64_t>> ParseStateLine(const std::string& line);

}  // namespace hmc::fault

#endif  // HMC_PERF_FAULT_AVERAGING_ROUNDS_H_
