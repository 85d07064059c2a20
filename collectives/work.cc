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

void Work::OnDone(std::function<void(const absl::Status&)> callback) {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    if (!completed_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
    status = status_;
  }
  callback(status);
}

void Work::Complete(absl::Status status, CollectiveReport report) {
  std::vector<std::function<void(const absl::Status&)>> callbacks;
  {
    MutexLock lock(&mu_);
    report_ = std::move(report);
    completed_ = true;
    status_ = status;
    callbacks.swap(callbacks_);
  }
  completion_.Complete(status);
  for (auto& callback : callbacks) callback(status);
}

}  // namespace hmc
