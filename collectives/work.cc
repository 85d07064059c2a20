#include "collectives/work.h"

namespace hmc {

absl::Status Work::Wait(absl::Time deadline) {
  absl::Status s = completion_.Wait(deadline);
  if (absl::IsDeadlineExceeded(s) && !completion_.done()) {
    return absl::DeadlineExceededError("collective still running at the wait's deadline");
  }
  return s;
}

bool Work::done() const { return completion_.done(); }

CollectiveReport Work::report() const {
  MutexLock lock(&mu_);
  return report_;
}

void Work::Complete(absl::Status status, CollectiveReport report) {
  {
    MutexLock lock(&mu_);
    report_ = std::move(report);
  }
  completion_.Complete(std::move(status));
}

}  // namespace hmc
