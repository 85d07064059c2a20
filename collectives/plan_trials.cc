#include "collectives/plan_trials.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace hmc {

bool PlanTrials::AllFinished(Class* c) {
  for (const Timed& t : c->timed) {
    if (std::isnan(t.seconds)) return false;
  }
  return true;
}

double PlanTrials::Score(const Class& c, int candidate) {
  std::vector<double> last;
  for (auto t = c.timed.rbegin(); t != c.timed.rend() && last.size() < 3; ++t) {
    if (t->candidate == candidate) last.push_back(t->seconds);
  }
  if (last.empty()) return kFailed;
  std::sort(last.begin(), last.end());
  return last[(last.size() - 1) / 2];
}

std::string PlanTrials::Scores(const Class& c) {
  std::string scores;
  for (size_t i = 0; i < c.candidates.size(); ++i) {
    absl::StrAppendFormat(&scores, "%s%s %.3g s", i == 0 ? "" : ", ", c.candidates[i],
                          Score(c, static_cast<int>(i)));
    if (i < c.modelled.size() && c.modelled[i] > 0) {
      absl::StrAppendFormat(&scores, " (model %.3g s)", c.modelled[i]);
    }
  }
  return scores;
}

int PlanTrials::Best(const Class& c, std::string* why) {
  const int count = static_cast<int>(c.candidates.size());
  int best = 0;
  for (int i = 1; i < count; ++i) {
    if (Score(c, i) < Score(c, best)) best = i;
  }
  *why = absl::StrFormat("fastest of its trials: %s", Scores(c));
  int favourite = -1;
  for (int i = 0; i < count && c.modelled.size() == c.candidates.size(); ++i) {
    if (c.modelled[i] > 0 && (favourite < 0 || c.modelled[i] < c.modelled[favourite])) {
      favourite = i;
    }
  }
  if (favourite < 0 || favourite == best || !(c.modelled[best] > 0) ||
      c.modelled[best] <= kModelDisagreement * c.modelled[favourite] ||
      Score(c, favourite) > kMargin * Score(c, best)) {
    return best;
  }
  *why =
      absl::StrFormat("the bandwidth model's (%s %.3g s, %s %.3g s), its trials within %.0f%%: %s",
                      c.candidates[favourite], c.modelled[favourite], c.candidates[best],
                      c.modelled[best], (kMargin - 1) * 100, Scores(c));
  return favourite;
}

PlanTrials::Step PlanTrials::Time(Class& c, int candidate, std::string why) {
  c.timed.push_back({candidate, std::nan("")});
  c.calls_since_timed = 0;
  return {c.candidates[candidate], static_cast<int>(c.timed.size()) - 1, std::move(why)};
}

PlanTrials::Step PlanTrials::Next(const std::string& key,
                                  const std::vector<std::string>& candidates, absl::Time deadline,
                                  const std::function<std::vector<double>()>& model) {
  MutexLock lock(&mu_);
  Class& c = classes_[key];
  if (c.candidates.empty()) {
    c.candidates = candidates;
    if (model) c.modelled = model();
  }
  const int count = static_cast<int>(c.candidates.size());
  const int started = static_cast<int>(c.timed.size());
  if (c.chosen < 0 && started < kPasses * count) {
    return Time(c, started % count,
                absl::StrFormat("trial %d of %d, then the fastest", started + 1, kPasses * count));
  }
  if (c.chosen >= 0 && ++c.calls_since_timed < kTimedEvery)
    return {c.candidates[c.chosen], -1, c.why};
  // A call that decides: the first after the trials, then every kTimedEvery-th.
  if (!mu_.AwaitWithDeadline(absl::Condition(&AllFinished, &c), deadline)) {
    return {c.candidates[std::max(c.chosen, 0)], -1, "timed calls unfinished; no change"};
  }
  std::string why;
  const int best = Best(c, &why);
  if (c.chosen < 0) {
    c.chosen = best;
    c.chosen_at = static_cast<int>(c.timed.size());
    c.why = why;
    return {c.candidates[c.chosen], -1, c.why};
  }
  if (best == c.chosen || Score(c, best) * kMargin >= Score(c, c.chosen)) {
    return Time(c, c.chosen, c.why + " (timed)");
  }
  // Another candidate beats the chosen plan's recent times. Switch if it ran since the choice
  // (a re-trial), else re-try it first: its time may be from links that were still cold.
  bool ran_since = false;
  for (int t = c.chosen_at; t < static_cast<int>(c.timed.size()); ++t) {
    ran_since = ran_since || c.timed[t].candidate == best;
  }
  if (!ran_since) {
    return Time(c, best, absl::StrFormat("re-trial of %s: %s", c.candidates[best], Scores(c)));
  }
  c.chosen = best;
  c.chosen_at = static_cast<int>(c.timed.size());
  c.why = absl::StrFormat("switched after a re-trial: %s", Scores(c));
  return Time(c, c.chosen, c.why + " (timed)");
}

void PlanTrials::Finished(const std::string& key, int trial, double seconds) {
  MutexLock lock(&mu_);
  std::vector<Timed>& timed = classes_[key].timed;
  if (trial >= 0 && trial < static_cast<int>(timed.size())) timed[trial].seconds = seconds;
}

}  // namespace hmc
