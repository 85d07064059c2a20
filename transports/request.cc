#include "transports/request.h"

namespace hmc {

absl::Status Request::Wait(absl::Time deadline) {
  MutexLock lock(&mu_);
  if (!mu_.AwaitWithDeadline(absl::Condition(&done_), deadline)) {
    return absl::DeadlineExceededError("deadline exceeded");
  }
  return status_;
}

bool Request::done() const {
  MutexLock lock(&mu_);
  return done_;
}

void Request::Complete(absl::Status status) {
  MutexLock lock(&mu_);
  if (done_) return;
  done_ = true;
  status_ = std::move(status);
}

}  // namespace hmc
