#ifndef HMC_COLLECTIVES_PLAN_TRIALS_H_
#define HMC_COLLECTIVES_PLAN_TRIALS_H_

#include <functional>
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
// an op, codecs, shares) run each candidate algorithm, in kPasses passes (the first on links
// still warming up), and later calls of the class run the one with the best score (the lower
// median of its last three times). The choice is watched: every kTimedEvery-th call of the class
// is timed, and when another candidate's score beats the chosen plan's by kMargin, the next timed
// call re-tries it, and the one after switches to it if it still wins.
// Trials can mislead (links still warming, a burst of cross traffic), so where the probe's
// bandwidth model (bandwidth_model.h) predicts the trials' winner to take more than
// kModelDisagreement times as long as the model's own favourite, the trials must show the
// favourite slower by more than kMargin to overrule the model; otherwise the model's favourite is
// chosen (the cost of a wrong model is then bounded by that margin).
// Every rank decides alike: the choice depends only on the order of calls, on the shared link
// matrix and on each timed call's time agreed inside that call (the slowest rank's), and a call
// that decides waits until every timed call of its class before it has finished.
class PlanTrials {
 public:
  static constexpr double kFailed = std::numeric_limits<double>::infinity();
  static constexpr int kPasses = 2;
  static constexpr int kTimedEvery = 8;
  static constexpr double kMargin = 1.1;
  static constexpr double kModelDisagreement = 1.25;

  struct Step {
    std::string algorithm;  // What this call runs.
    int trial = -1;         // Which timed call this is (report it to Finished); -1: untimed.
    std::string why;        // For the call's report.
  };

  // The next call of class `key` among `candidates` (the same for every call of the class).
  // `model`, asked once, when the class is new (so that later calls do not pay for it), gives the
  // bandwidth model's seconds for each candidate in the same order (empty, or 0 for one it does
  // not model: no model; a null `model` too). Waits, until `deadline`, for timed calls still
  // running; should they not finish by then (a broken group), returns the chosen plan (before a
  // choice: the first candidate) untimed.
  Step Next(const std::string& key, const std::vector<std::string>& candidates, absl::Time deadline,
            const std::function<std::vector<double>()>& model = nullptr);
  // A timed call's time, seconds (kFailed when it did not run to the end).
  void Finished(const std::string& key, int trial, double seconds);

 private:
  struct Timed {
    int candidate;
    double seconds;  // NaN until it finished.
  };
  struct Class {
    std::vector<std::string> candidates;
    std::vector<double> modelled;  // Seconds per candidate; 0: not modelled.
    std::vector<Timed> timed;
    int chosen = -1;
    int chosen_at = 0;  // Timed calls there were when the choice was made.
    std::string why;
    int calls_since_timed = 0;
  };
  static bool AllFinished(Class* c);
  // The lower median of a candidate's last three times; infinite before it ran.
  static double Score(const Class& c, int candidate);
  static std::string Scores(const Class& c);
  // The candidate with the best score, unless the model overrules the trials; `why` says which.
  static int Best(const Class& c, std::string* why);
  static Step Time(Class& c, int candidate, std::string why);

  Mutex mu_;
  std::map<std::string, Class> classes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_PLAN_TRIALS_H_
