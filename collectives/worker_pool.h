#ifndef HMC_COLLECTIVES_WORKER_POOL_H_
#define HMC_COLLECTIVES_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/mutex.h"

namespace hmc {

// A fixed set of threads running tasks in submission order. The destructor runs what is queued,
// then joins.
class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  void Submit(std::function<void()> task);

 private:
  void Run();

  Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_WORKER_POOL_H_
