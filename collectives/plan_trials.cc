#include "collectives/plan_trials.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace hmc {

bool PlanTrials::AllFinished(Class* c) {
  for (double s : c->seconds) {
    if (std::isnan(s)) return false;
  }
  return true;
}

PlanTrials::Step PlanTrials::Next(const std::string& key,
                                  const std::vector<std::string>& candidates, absl::Time deadline) {
  MutexLock lock(&mu_);
  Class& c = classes_[key];
  if (c.candidates.empty()) c.candidates = candidates;
  if (!c.chosen.empty()) return {c.chosen, -1, c.why};
  const int started = static_cast<int>(c.seconds.size());
  const int count = static_cast<int>(c.candidates.size());
  if (started < count) {
    c.seconds.push_back(std::nan(""));
    return {c.candidates[started], started,
            absl::StrFormat("trial %d of %d, then the fastest", started + 1, count)};
  }
  if (!mu_.AwaitWithDeadline(absl::Condition(&AllFinished, &c), deadline)) {
    return {c.candidates.front(), -1, "trials unfinished; the rules' choice"};
  }
  int best = 0;
  std::string times;
  for (int i = 0; i < count; ++i) {
    if (c.seconds[i] < c.seconds[best]) best = i;
    absl::StrAppendFormat(&times, "%s%s %.3g s", i == 0 ? "" : ", ", c.candidates[i], c.seconds[i]);
  }
  c.chosen = c.candidates[best];
  c.why = absl::StrFormat("fastest of its trials: %s", times);
  return {c.chosen, -1, c.why};
}

void PlanTrials::Finished(const std::string& key, int trial, double seconds) {
  MutexLock lock(&mu_);
  std::vector<double>& s = classes_[key].seconds;
  if (trial >= 0 && trial < static_cast<int>(s.size())) s[trial] = seconds;
}

}  // namespace hmc
