#include "collectives/worker_pool.h"

#include <algorithm>

#include "core/placement.h"

namespace hmc {

WorkerPool::WorkerPool(int threads) {
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

WorkerPool::Ticket WorkerPool::Submit(std::function<void()> task) {
  MutexLock lock(&mu_);
  const Ticket ticket = next_ticket_++;
  tasks_.emplace_back(ticket, std::move(task));
  return ticket;
}

bool WorkerPool::RunHereIfQueued(Ticket ticket) {
  std::function<void()> task;
  {
    MutexLock lock(&mu_);
    // Once stopping, the workers drain the queue: what the destructor waits for.
    if (stopping_) return false;
    auto it = std::find_if(tasks_.begin(), tasks_.end(),
                           [ticket](const auto& queued) { return queued.first == ticket; });
    if (it == tasks_.end()) return false;
    task = std::move(it->second);
    tasks_.erase(it);
    ++running_here_;
  }
  task();
  MutexLock lock(&mu_);
  --running_here_;
  return true;
}

void WorkerPool::Run() {
  BindThisThread(ThreadRole::kWorker);
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;
      task = std::move(tasks_.front().second);
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace hmc
