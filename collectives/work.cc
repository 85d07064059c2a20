#include "collectives/work.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "collectives/worker_pool.h"

namespace hmc {

absl::Status Work::Wait(absl::Time deadline) {
  const bool own_limit = deadline >= limit_;
  if (own_limit) {
    if (auto [pool, ticket] = QueuedTask(/*forget=*/true); pool != nullptr) {
      pool->RunHereIfQueued(ticket);
    }
  }
  absl::Status s = completion_.Wait(std::min(deadline, limit_));
  if (!absl::IsDeadlineExceeded(s) || completion_.done()) return s;
  if (!own_limit)
    return absl::DeadlineExceededError("collective still running at the wait's deadline");
  std::function<void()> expire;
  {
    MutexLock lock(&mu_);
    expire.swap(on_expiry_);
  }
  if (expire) {
    expire();  // Ends the call: its outcome names the cause.
    if (absl::Status ended = completion_.Wait(absl::Now() + absl::Seconds(5)); completion_.done()) {
      return ended;
    }
  }
  return absl::DeadlineExceededError(
      absl::StrFormat("still running at its deadline (%s), and more", absl::FormatTime(limit_)));
}

void Work::QueuedAs(std::weak_ptr<WorkerPool> pool, uint64_t ticket) {
  MutexLock lock(&mu_);
  pool_ = std::move(pool);
  ticket_ = ticket;
}

void Work::StartWithoutWaiter() {
  if (auto [pool, ticket] = QueuedTask(/*forget=*/false); pool != nullptr) pool->StartNow(ticket);
}

std::pair<std::shared_ptr<WorkerPool>, uint64_t> Work::QueuedTask(bool forget) {
  MutexLock lock(&mu_);
  std::shared_ptr<WorkerPool> pool = pool_.lock();
  if (forget) pool_.reset();
  return {std::move(pool), ticket_};
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

void Work::Complete(absl::Status status, CollectiveReport report, WorkerPool* callbacks_on) {
  std::vector<std::function<void(const absl::Status&)>> callbacks;
  {
    MutexLock lock(&mu_);
    report_ = std::move(report);
    completed_ = true;
    status_ = status;
    callbacks.swap(callbacks_);
  }
  completion_.Complete(status);
  if (callbacks_on != nullptr && !callbacks.empty()) {
    callbacks_on->Submit([callbacks = std::move(callbacks), status] {
      for (auto& callback : callbacks) callback(status);
    });
    return;
  }
  for (auto& callback : callbacks) callback(status);
}

}  // namespace hmc
