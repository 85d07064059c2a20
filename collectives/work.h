#ifndef HMC_COLLECTIVES_WORK_H_
#define HMC_COLLECTIVES_WORK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/mutex.h"
#include "transports/request.h"

namespace hmc {

// What a finished collective reports.
struct CollectiveReport {
  std::string name;       // "allreduce #12".
  std::string algorithm;  // "ring", "halving_doubling", "chain", "direct".
  std::string plan;       // All-reduce: codecs, shares and why the tuner chose the algorithm.
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t bytes_sent_across_zones = 0;  // Of bytes_sent, to ranks in other zones.
  double egress_usd = 0;                 // What this rank's sends cost at the price table.
  // This rank's sending rate as measured by this call or an earlier one, bytes/s: what sends on
  // several links at once are paced to share (HMC_PACE_SENDS; 0: not measured, or off).
  double send_bytes_per_s = 0;
  // Links whose sends shared that rate (only the hierarchical plan's cross-zone links pace).
  int paced_links = 0;
  absl::Duration check_time;  // Argument check (one round trip).
  absl::Duration data_time;   // Moving and reducing data.
  // The algorithm's phases on this rank, in order (hierarchical: in zone, across zones, ...).
  std::vector<std::pair<std::string, absl::Duration>> phases;
};

// An asynchronous collective. The communicator completes it once; any thread may wait.
class WorkerPool;  // collectives/worker_pool.h, not installed: a work only points at it.

class Work {
 public:
  // `limit`: what Wait() without a deadline waits for at most, past the call's own deadline;
  // `on_expiry` runs (once) when such a wait reaches it, to end the call.
  explicit Work(absl::Time limit = absl::InfiniteFuture(), std::function<void()> on_expiry = {})
      : limit_(limit), on_expiry_(std::move(on_expiry)) {}

  // Waits until the collective ends or the deadline passes (then DeadlineExceeded, and the
  // collective keeps running until its own deadline). Without a deadline: until the work's limit.
  absl::Status Wait(absl::Time deadline = absl::InfiniteFuture());
  bool done() const;
  // Valid once done.
  CollectiveReport report() const;
  // Runs `callback` with the outcome once done: for a collective on the thread that completes
  // it (a worker, or the waiter that ran it), for a point-to-point call on the communicator's
  // callback thread (never the transport's), or at once on this thread if it is already done. Keep
  // it short (it delays that thread); it may call report() but not start collectives and wait for
  // them. What libtorch's futures and the DDP helper build on.
  void OnDone(std::function<void(const absl::Status&)> callback);

  // The collective's task in `pool`. Wait() without an earlier deadline first runs it on the
  // waiting thread where no worker has started it (WorkerPool::RunHereIfQueued).
  void QueuedAs(std::weak_ptr<WorkerPool> pool, uint64_t ticket);  // A WorkerPool::Ticket.
  // Nobody will wait for this work on a thread that could run it: its end is watched through
  // OnDone (a libtorch future, whose waiters hmc cannot reach). A collective held for its waiter
  // (WorkerPool::Start::kForAWaiter) starts on a worker now, not at the end of its grace.
  void StartWithoutWaiter();

  // Callbacks run on `callbacks` when given (so that what completes the work, a transport's
  // progress thread, never runs user code), else on this thread.
  void Complete(absl::Status status, CollectiveReport report, WorkerPool* callbacks = nullptr);

 private:
  Request completion_;  // The outcome; the report is set just before it completes.
  const absl::Time limit_;
  std::function<void()> on_expiry_ ABSL_GUARDED_BY(mu_);
  // The pool that holds the collective, if still alive, and its ticket there; `forget`: the
  // next call gets no pool (Wait tries to run it once).
  std::pair<std::shared_ptr<WorkerPool>, uint64_t> QueuedTask(bool forget);

  std::weak_ptr<WorkerPool> pool_ ABSL_GUARDED_BY(mu_);  // Reset once Wait tried to run it.
  uint64_t ticket_ ABSL_GUARDED_BY(mu_) = 0;
  mutable Mutex mu_;
  CollectiveReport report_ ABSL_GUARDED_BY(mu_);
  bool completed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const absl::Status&)>> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_WORK_H_
