#include "transports/request.h"

#include "core/event_loop.h"

namespace hmc {
namespace {

bool AllDone(const std::vector<Request*>& requests) {
  for (const Request* r : requests) {
    if (!r->done()) return false;
  }
  return true;
}

// Where every one of `requests` is of one loop and lets its waiter poll: runs the loop on this
// thread until they are done or the deadline passes (true), if the loop lets it in. False: the
// caller sleeps until they complete (a request whose waiter does not poll was left to the loop's
// thread when it was made: Request::LeaveToLoopThread).
bool WaitByPolling(const std::vector<Request*>& requests, absl::Time deadline) {
  std::shared_ptr<EventLoop> loop = requests.front()->loop().lock();
  if (loop == nullptr) return false;
  for (const Request* r : requests) {
    const std::weak_ptr<EventLoop>& other = r->loop();
    if (!r->waiter_polls() || loop.owner_before(other) || other.owner_before(loop)) return false;
  }
  return loop->Drive(deadline, [&] { return AllDone(requests); }) != EventLoop::Driven::kNotHere;
}

}  // namespace

absl::Status Request::Wait(absl::Time deadline) {
  if (!done() && WaitByPolling({this}, deadline) && !done()) {
    return absl::DeadlineExceededError("deadline exceeded");
  }
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
  std::vector<std::function<void(const absl::Status&)>> then;
  {
    MutexLock lock(&mu_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
    bytes_ = bytes;
    then.swap(then_);
  }
  for (auto& callback : then) callback(status_);  // status_ no longer changes once done_.
}

void Request::LeaveToLoopThread() {
  std::shared_ptr<EventLoop> loop = loop_.lock();
  if (loop == nullptr) return;
  loop->UnpolledRequestStarted();
  Then([weak = loop_](const absl::Status&) {
    if (std::shared_ptr<EventLoop> alive = weak.lock()) alive->UnpolledRequestEnded();
  });
}

void Request::Then(std::function<void(const absl::Status&)> callback) {
  absl::Status outcome;
  {
    MutexLock lock(&mu_);
    if (!done_) {
      then_.push_back(std::move(callback));
      return;
    }
    outcome = status_;
  }
  callback(outcome);
}

namespace {

// How many of a set of requests are still running.
class Countdown {
 public:
  explicit Countdown(size_t left) : left_(left) {}
  void Done() {
    MutexLock lock(&mu_);
    --left_;
  }
  bool Wait(absl::Time deadline) {
    MutexLock lock(&mu_);
    auto none_left = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return left_ == 0; };
    return mu_.AwaitWithDeadline(absl::Condition(&none_left), deadline);
  }

 private:
  Mutex mu_;
  size_t left_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

bool WaitForAll(const std::vector<RequestPtr>& requests, absl::Time deadline) {
  std::vector<Request*> running;
  for (const RequestPtr& r : requests) {
    if (!r->done()) running.push_back(r.get());
  }
  if (running.empty()) return true;
  if (WaitByPolling(running, deadline)) return AllDone(running);
  if (running.size() == 1) {
    running[0]->Wait(deadline).IgnoreError();
    return running[0]->done();
  }
  auto left = std::make_shared<Countdown>(running.size());
  for (Request* r : running) r->Then([left](const absl::Status&) { left->Done(); });
  return left->Wait(deadline);
}

}  // namespace hmc
