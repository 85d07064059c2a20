#ifndef HMC_COLLECTIVES_WORKER_POOL_H_
#define HMC_COLLECTIVES_WORKER_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/mutex.h"

namespace hmc {

// A fixed set of threads running tasks in the order they become ready, where a thread about to
// wait for a task may run it itself (RunHereIfQueued). The destructor runs what is queued, then
// joins.
//
// A task held for its waiter (Start::kForAWaiter) is left to the thread that will wait for it for
// up to `waiter_grace`, and only then given to a worker. A call whose caller waits at once then
// runs on the caller's thread: no wake of a worker, and no wake of the caller by the worker that
// completes it, the two thread hand-offs that are most of a small collective's time on a busy
// host (a worker woken at Submit takes the task before its caller comes to wait). To start held
// tasks on time without a wake at each Submit, one idle worker keeps time: it sleeps at most
// `waiter_grace` at a time while a task is held or one was within the last kKeepTimeGraces graces.
class WorkerPool {
 public:
  using Ticket = uint64_t;
  enum class Start {
    kNow,        // A worker takes it at once.
    kForAWaiter  // Held up to waiter_grace for RunHereIfQueued. A later held task ends the hold
                 // of those before it: their submitter went on without waiting.
  };
  // How long after the last held task the time-keeping worker goes on waking every waiter_grace,
  // so that the next held task finds it and needs no wake.
  static constexpr int kKeepTimeGraces = 50;

  explicit WorkerPool(int threads, absl::Duration waiter_grace = absl::ZeroDuration());
  ~WorkerPool() { Stop(); }
  // Runs what is queued, joins the workers and waits for the runs of RunHereIfQueued; later
  // Submits are not run. For an owner whose tasks must end before it does, while others may
  // still hold the pool.
  void Stop();
  Ticket Submit(std::function<void()> task, Start start = Start::kNow);
  // Runs the task on the calling thread if no worker has taken it yet, and returns whether it
  // did. The destructor waits for such runs too.
  bool RunHereIfQueued(Ticket ticket);
  // Ends the hold of a task held for its waiter: a worker takes it now.
  void StartNow(Ticket ticket);

 private:
  struct Task {
    Ticket ticket;
    std::function<void()> run;
  };

  void Run();
  // A worker's next task; false once the pool stops with nothing queued.
  bool NextTask(std::function<void()>* task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the held task, if any, ready.
  void ReleaseHeld() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When a worker may take the held task: a grace after it was held.
  absl::Time HeldDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return last_held_ + waiter_grace_;
  }

  const absl::Duration waiter_grace_;
  Mutex mu_;
  std::deque<Task> ready_ ABSL_GUARDED_BY(mu_);
  std::optional<Task> held_ ABSL_GUARDED_BY(mu_);
  absl::Time last_held_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // When held_ was.
  bool timekeeper_ ABSL_GUARDED_BY(mu_) = false;  // An idle worker sleeps with a deadline.
  Ticket next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  int running_here_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ = false;  // Stop's own: one thread stops the pool.
  std::vector<std::thread> threads_;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_WORKER_POOL_H_
