#include "collectives/work.h"

namespace hmc {

absl::Status Work::Wait(absl::Time deadline) {
  MutexLock lock(&mu_);
  if (!mu_.AwaitWithDeadline(absl::Condition(&done_), deadline)) {
    return absl::DeadlineExceededError("collective still running at the wait's deadline");
  }
  return status_;
}

bool Work::done() const {
  MutexLock lock(&mu_);
  return done_;
}

CollectiveReport Work::report() const {
  MutexLock lock(&mu_);
  return report_;
}

void Work::Complete(absl::Status status, CollectiveReport report) {
  MutexLock lock(&mu_);
  done_ = true;
  status_ = std::move(status);
  report_ = std::move(report);
}

}  // namespace hmc
