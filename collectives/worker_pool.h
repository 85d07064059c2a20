#ifndef HMC_COLLECTIVES_WORKER_POOL_H_
#define HMC_COLLECTIVES_WORKER_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/mutex.h"

namespace hmc {

// A fixed set of threads running tasks in submission order (but for a task a waiter runs itself).
// The destructor runs what is queued, then joins.
class WorkerPool {
 public:
  using Ticket = uint64_t;

  explicit WorkerPool(int threads);
  ~WorkerPool() { Stop(); }
  // Runs what is queued, joins the workers and waits for the runs of RunHereIfQueued; later
  // Submits are not run. For an owner whose tasks must end before it does, while others may
  // still hold the pool.
  void Stop();
  Ticket Submit(std::function<void()> task);
  // Runs the task on the calling thread if no worker has taken it yet, and returns whether it
  // did. For a thread about to wait for the task's outcome: running it itself spares two thread
  // hand-offs (the worker's wake, and its wake of the waiter), which are most of a small
  // collective's time on a busy host. The destructor waits for such runs too.
  bool RunHereIfQueued(Ticket ticket);

 private:
  void Run();

  Mutex mu_;
  std::deque<std::pair<Ticket, std::function<void()>>> tasks_ ABSL_GUARDED_BY(mu_);
  Ticket next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  int running_here_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ = false;  // Stop's own: one thread stops the pool.
  std::vector<std::thread> threads_;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_WORKER_POOL_H_
