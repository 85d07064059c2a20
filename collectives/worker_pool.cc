#include "collectives/worker_pool.h"

#include <algorithm>

#include "core/placement.h"

namespace hmc {

WorkerPool::WorkerPool(int threads, absl::Duration waiter_grace) : waiter_grace_(waiter_grace) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

void WorkerPool::Stop() {
  if (joined_) return;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& t : threads_) t.join();
  joined_ = true;
  MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return running_here_ == 0; };
  mu_.Await(absl::Condition(&idle));
}

WorkerPool::Ticket WorkerPool::Submit(std::function<void()> task, Start start) {
  MutexLock lock(&mu_);
  const Ticket ticket = next_ticket_++;
  if (start == Start::kNow || waiter_grace_ <= absl::ZeroDuration()) {
    ready_.push_back(Task{ticket, std::move(task)});
    return ticket;
  }
  ReleaseHeld();  // The task held before this one: its submitter went on without waiting for it.
  held_ = Task{ticket, std::move(task)};
  last_held_ = absl::Now();
  return ticket;
}

bool WorkerPool::RunHereIfQueued(Ticket ticket) {
  std::function<void()> task;
  {
    MutexLock lock(&mu_);
    // Once stopping, the workers drain the queue: what the destructor waits for.
    if (stopping_) return false;
    if (held_.has_value() && held_->ticket == ticket) {
      task = std::move(held_->run);
      held_.reset();
    } else {
      auto it = std::find_if(ready_.begin(), ready_.end(),
                             [ticket](const Task& queued) { return queued.ticket == ticket; });
      if (it == ready_.end()) return false;
      task = std::move(it->run);
      ready_.erase(it);
    }
    ++running_here_;
  }
  task();
  MutexLock lock(&mu_);
  --running_here_;
  return true;
}

void WorkerPool::StartNow(Ticket ticket) {
  MutexLock lock(&mu_);
  if (held_.has_value() && held_->ticket == ticket) ReleaseHeld();
}

void WorkerPool::ReleaseHeld() {
  if (!held_.has_value()) return;
  ready_.push_back(*std::move(held_));
  held_.reset();
}

bool WorkerPool::NextTask(std::function<void()>* task) {
  for (;;) {
    const absl::Time now = absl::Now();
    if (stopping_ || HeldDue() <= now) ReleaseHeld();
    if (!ready_.empty()) {
      *task = std::move(ready_.front().run);
      ready_.pop_front();
      return true;
    }
    if (stopping_) return false;  // The held task, if any, was made ready.
    const bool keep_time = held_.has_value() || now - last_held_ < kKeepTimeGraces * waiter_grace_;
    if (keep_time && !timekeeper_) {
      // Until the held task is due, or one grace: a task held meanwhile is due no sooner.
      timekeeper_ = true;
      const absl::Time until = held_.has_value() ? HeldDue() : now + waiter_grace_;
      auto woken = [this]()
                       ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !ready_.empty(); };
      mu_.AwaitWithDeadline(absl::Condition(&woken), until);
      timekeeper_ = false;
      continue;
    }
    // A held task with no worker keeping time wakes one to keep it.
    auto wanted = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return stopping_ || !ready_.empty() || (!timekeeper_ && held_.has_value());
    };
    mu_.Await(absl::Condition(&wanted));
  }
}

void WorkerPool::Run() {
  BindThisThread(ThreadRole::kWorker);
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      if (!NextTask(&task)) return;
    }
    task();
  }
}

}  // namespace hmc
