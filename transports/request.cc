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

size_t Request::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

void Request::Complete(absl::Status status, size_t bytes) {
  std::function<void(const absl::Status&)> then;
  {
    MutexLock lock(&mu_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
    bytes_ = bytes;
    then = std::move(then_);
  }
  if (then) then(status_);  // status_ no longer changes once done_.
}

void Request::Then(std::function<void(const absl::Status&)> callback) {
  absl::Status outcome;
  {
    MutexLock lock(&mu_);
    if (!done_) {
      then_ = std::move(callback);
      return;
    }
    outcome = status_;
  }
  callback(outcome);
}

}  // namespace hmc
