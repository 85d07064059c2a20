#ifndef HMC_TRANSPORTS_REQUEST_H_
#define HMC_TRANSPORTS_REQUEST_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/mutex.h"

namespace hmc {

class EventLoop;

// Completion of one asynchronous send or receive. A transport completes it exactly once; any
// thread may wait for it with a deadline.
class Request {
 public:
  Request() = default;
  // A request that `loop`'s events complete. Where `waiter_polls`, a thread that waits for it
  // (and only for requests that allow it, of the same loop) runs those events itself
  // (EventLoop::Drive) instead of sleeping until the loop's thread has; otherwise it sleeps, and
  // whoever made the request left it to the loop's thread (LeaveToLoopThread).
  Request(std::weak_ptr<EventLoop> loop, bool waiter_polls)
      : loop_(std::move(loop)), waiter_polls_(waiter_polls) {}

  // Waits until completion or the deadline; returns the completion status or DeadlineExceeded.
  absl::Status Wait(absl::Time deadline);
  bool done() const;
  // Completes the request; later calls are ignored (the first outcome wins). A receive reports
  // the length of the message it took.
  void Complete(absl::Status status, size_t bytes = 0);
  // The length of the message a completed receive took (what RecvUpTo callers read).
  size_t bytes() const;
  // Runs `callback` with the outcome once the request completes (at once if it has), on the
  // completing thread: it must not block. Callbacks run in the order they were given.
  void Then(std::function<void(const absl::Status&)> callback);
  // For a request whose waiter sleeps (it does not let its waiter poll, or its caller sleeps on
  // something else, as a point-to-point call's caller sleeps on the call's Work): the loop's
  // thread takes the sockets back now, and at once after any waiter that polls meanwhile, until
  // the request completes (EventLoop::UnpolledRequestStarted). Once, by its maker.
  void LeaveToLoopThread();
  // The loop whose events complete it; empty where nothing lets a waiter run them.
  const std::weak_ptr<EventLoop>& loop() const { return loop_; }
  bool waiter_polls() const { return waiter_polls_; }

 private:
  const std::weak_ptr<EventLoop> loop_{};
  const bool waiter_polls_ = false;
  mutable Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::function<void(const absl::Status&)>> then_ ABSL_GUARDED_BY(mu_);
};

using RequestPtr = std::shared_ptr<Request>;

// Waits until every one of `requests` has completed or the deadline passes; returns whether all
// completed. The waiting thread wakes once, when the last completes: waiting for them one by one
// wakes it for each completion that comes while it sleeps, a thread hand-off apiece.
bool WaitForAll(const std::vector<RequestPtr>& requests, absl::Time deadline);

inline RequestPtr CompletedRequest(absl::Status status) {
  auto request = std::make_shared<Request>();
  request->Complete(std::move(status));
  return request;
}

}  // namespace hmc

#endif  // HMC_TRANSPORTS_REQUEST_H_
