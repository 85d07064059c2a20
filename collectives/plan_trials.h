#ifndef HMC_COLLECTIVES_PLAN_TRIALS_H_
#define HMC_COLLECTIVES_PLAN_TRIALS_H_

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/mutex.h"

namespace hmc {

// The tuner's measured part (HMC_EXPLORE=1). The rules guess from the probe's matrix, which sees
// links loaded one way only; which plan wins also depends on how the phases overlap, on TCP and on
// the peers' CPUs. So the first auto all-reduces of each class (a power of two of bytes, a dtype,
// an op, codecs, shares) run each candidate algorithm once — the rules' choice first — and later
// calls of the class run the fastest. Every rank decides alike: the choice depends only on the
// order of calls and on each trial's time agreed inside that call (the slowest rank's), and the
// first call after the trials waits until all of them have finished.
class PlanTrials {
 public:
  static constexpr double kFailed = std::numeric_limits<double>::infinity();

  struct Step {
    std::string algorithm;  // What this call runs.
    int trial = -1;         // Which trial this call is; -1 once the class has chosen.
    std::string why;        // For the call's report.
  };

  // The next call of class `key` among `candidates` (the same for every call of the class): a
  // trial while some candidate has not run, then the fastest. Waits, until `deadline`, for trials
  // still running; should they not finish by then (a broken group), returns the first candidate.
  Step Next(const std::string& key, const std::vector<std::string>& candidates,
            absl::Time deadline);
  // A trial's time, seconds (kFailed when it did not run to the end).
  void Finished(const std::string& key, int trial, double seconds);

 private:
  struct Class {
    std::vector<std::string> candidates;
    std::vector<double> seconds;  // Per trial started; NaN until it finished.
    std::string chosen;
    std::string why;
  };
  static bool AllFinished(Class* c);

  Mutex mu_;
  std::map<std::string, Class> classes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_PLAN_TRIALS_H_
