#include "collectives/worker_pool.h"

#include "core/placement.h"

namespace hmc {

WorkerPool::WorkerPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkerPool::~WorkerPool() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& t : threads_) t.join();
}

void WorkerPool::Submit(std::function<void()> task) {
  MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
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
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace hmc
