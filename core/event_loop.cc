#include "core/event_loop.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace hmc {
namespace {

constexpr int kEventsPerWait = 128;
// The longest a polling waiter sleeps in epoll before it runs the owner's checks (`after`) again,
// as the loop's thread does between its waits.
constexpr absl::Duration kWaiterSleep = absl::Milliseconds(100);
// A yielding spin follows only a wait no longer than this many spins.
constexpr int kYieldingSpinAfter = 2;

// The loop whose work this thread runs now, if any: work it runs posts instead of running more
// of the loop's work inside itself.
thread_local const EventLoop* t_running = nullptr;

// Holds the loop's turn for this thread: `turn` is locked, and released here.
class TurnHeld {
 public:
  TurnHeld(Mutex& turn, const EventLoop* loop) : turn_(turn), outer_(t_running) {
    t_running = loop;
  }
  ~TurnHeld() {
    t_running = outer_;
    turn_.Unlock();
  }
  TurnHeld(const TurnHeld&) = delete;
  TurnHeld& operator=(const TurnHeld&) = delete;

 private:
  Mutex& turn_;
  const EventLoop* const outer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create() {
  std::unique_ptr<EventLoop> loop(new EventLoop());
  loop->epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  loop->wake_ = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!loop->epoll_.valid() || !loop->wake_.valid()) {
    return absl::InternalError("epoll/eventfd failed");
  }
  epoll_data_t wake{};
  wake.ptr = &loop->wake_;
  loop->Watch(loop->wake_.get(), wake, EPOLLIN);
  return loop;
}

void EventLoop::Watch(int fd, epoll_data_t data, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data = data;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
}

void EventLoop::Modify(int fd, epoll_data_t data, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data = data;
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::Unwatch(int fd) { epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void EventLoop::Post(std::function<void()> work) {
  bool wake = false;
  {
    MutexLock lock(&mu_);
    // Work already waiting has woken the loop, which takes everything posted when it gets there:
    // one wake per batch spares the system call and the loop's extra turn. While a waiter polls,
    // the loop's thread waits for posted work on mu_, not in epoll.
    wake = posted_.empty() && !waiter_polling_;
    posted_.push_back(std::move(work));
  }
  if (wake) Wake();
}

void EventLoop::RunHereOrPost(std::function<void()> work) {
  if (t_running != this && turn_.TryLock()) {
    TurnHeld held(turn_, this);
    bool idle = false;
    {
      MutexLock lock(&mu_);
      // Posted work runs first (it was posted before this), and after Stop nothing runs.
      idle = !stopping_ && posted_.empty();
    }
    if (idle) {
      work();
      WakePollingWaiter();
      return;
    }
  }
  Post(std::move(work));
}

void EventLoop::RunExclusively(absl::FunctionRef<void()> work) {
  turn_.Lock();
  TurnHeld held(turn_, this);
  work();
  WakePollingWaiter();
}

void EventLoop::WakePollingWaiter() {
  if (!waiter_on_event_) return;  // No waiter ever polls this loop.
  // A waiter that set waiter_polling_ after this looks checks `done` after it, and sees what the
  // work completed: mu_ orders the two.
  bool polling;
  {
    MutexLock lock(&mu_);
    polling = waiter_polling_;
  }
  if (polling) Wake();
}

void EventLoop::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
}

void EventLoop::Wake() {
  const uint64_t one = 1;
  const ssize_t ignored = write(wake_.get(), &one, sizeof(one));
  (void)ignored;
}

void EventLoop::LetWaitersPoll(std::function<void(epoll_data_t data, uint32_t events)> on_event,
                               std::function<void()> after, absl::Duration hold) {
  waiter_on_event_ = std::move(on_event);
  waiter_after_ = std::move(after);
  MutexLock lock(&mu_);
  waiter_hold_ = hold;
}

bool EventLoop::LoopMayPoll(absl::Duration longest) {
  auto held = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return waiter_polling_ || (!recall_ && absl::Now() - waiter_left_ < waiter_hold_);
  };
  // Polling again ends the hold; a recall is for as long as what it was for takes.
  auto take_back = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    recall_ = false;
    waiter_left_ = absl::InfinitePast();
    return true;
  };
  if (!held()) return take_back();
  auto wanted = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stopping_ || !posted_.empty() || recall_;
  };
  const absl::Duration hold_left = waiter_hold_ - (absl::Now() - waiter_left_);
  mu_.AwaitWithDeadline(
      absl::Condition(&wanted),
      absl::Now() + std::min(longest, waiter_polling_ ? waiter_hold_ : hold_left));
  // Posted work runs without a poll; the sockets are this thread's again once no waiter holds
  // them.
  if (stopping_ || !posted_.empty() || held()) return false;
  return take_back();
}

void EventLoop::Dispatch(const epoll_event* events, int n,
                         absl::FunctionRef<void(epoll_data_t data, uint32_t events)> on_event) {
  for (int i = 0; i < n; ++i) {
    if (events[i].data.ptr == &wake_) {
      uint64_t value;
      const ssize_t ignored = read(wake_.get(), &value, sizeof(value));
      (void)ignored;
      continue;
    }
    on_event(events[i].data, events[i].events);
  }
}

bool EventLoop::RunOnce(int timeout_ms,
                        absl::FunctionRef<void(epoll_data_t data, uint32_t events)> on_event,
                        absl::FunctionRef<void()> after) {
  bool poll = false;
  bool posted = false;
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
    poll = LoopMayPoll(absl::Milliseconds(timeout_ms));
    if (stopping_) return false;
    loop_polling_ = poll;
    posted = !posted_.empty();
  }
  epoll_event events[kEventsPerWait];
  // Work posted while a waiter polled woke nobody through epoll: it runs without a wait.
  const int n =
      poll ? epoll_wait(epoll_.get(), events, kEventsPerWait, posted ? 0 : timeout_ms) : 0;
  {
    turn_.Lock();
    TurnHeld held(turn_, this);
    Dispatch(events, n, on_event);
    std::vector<std::function<void()>> work;
    {
      MutexLock lock(&mu_);
      work.swap(posted_);
    }
    for (std::function<void()>& w : work) w();
    after();
    if (!work.empty()) WakePollingWaiter();
  }
  if (poll) {
    MutexLock lock(&mu_);
    loop_polling_ = false;  // A waiter may take the sockets now: this batch is through.
  }
  return true;
}

EventLoop::Driven EventLoop::Drive(absl::Time deadline, absl::FunctionRef<bool()> done) {
  if (!waiter_on_event_ || t_running == this) return Driven::kNotHere;
  Spin spin;
  {
    MutexLock lock(&mu_);
    spin = waiter_spin_;
    if (stopping_ || waiter_polling_) {
      if (waiter_polling_) passed_over_ = true;
      return Driven::kNotHere;
    }
    waiter_polling_ = true;
    if (loop_polling_) {
      Wake();  // Its wait ends; it finds a waiter polling and leaves the sockets to it.
      auto loop_off = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !loop_polling_; };
      if (!mu_.AwaitWithDeadline(absl::Condition(&loop_off), deadline)) {
        StopPolling();
        return Driven::kDeadline;
      }
    }
  }
  Driven result = Driven::kDone;
  for (;;) {
    if (done()) break;
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      result = Driven::kDeadline;
      break;
    }
    if (!WaitForReady(std::min(deadline, now + kWaiterSleep), spin)) {
      result = Driven::kNotHere;
      break;
    }
    if (!HandleWaiterBatch()) {
      result = Driven::kNotHere;
      break;
    }
  }
  MutexLock lock(&mu_);
  StopPolling();
  return result;
}

void EventLoop::SetWaiterSpin(Spin spin) {
  MutexLock lock(&mu_);
  waiter_spin_ = spin;
}

bool EventLoop::WaitForReady(absl::Time until, Spin spin) {
  // Without the turn, so that callers and posted work go on meanwhile; what it finds says only
  // that something is ready.
  epoll_event ready;
  int n = 0;
  const absl::Time start = absl::Now();
  // A yielding spin hands the core to whatever else may run, for as long as the scheduler lets
  // that run: a whole time slice where it computes (the other ranks' backward passes while this
  // one waits for their gradients). That pays only while waits are short, as the last one was.
  const bool spins = spin.time > absl::ZeroDuration() &&
                     (!spin.yield || last_ready_wait_ <= kYieldingSpinAfter * spin.time);
  if (spins) {
    const absl::Time spin_until = std::min(until, start + spin.time);
    do {
      n = epoll_wait(epoll_.get(), &ready, 1, 0);
      if (n == 0 && spin.yield) sched_yield();
    } while (n == 0 && absl::Now() < spin_until);
  }
  if (n == 0) n = epoll_wait(epoll_.get(), &ready, 1, PollTimeoutMs(until));
  last_ready_wait_ = absl::Now() - start;
  return n >= 0 || errno == EINTR;
}

void EventLoop::StopPolling() {
  waiter_polling_ = false;
  waiter_left_ = absl::Now();
  // Another waiter sleeps without polling, or requests are in flight that nobody polls for
  // now (a send whose waiter sleeps on the call, a large transfer): the loop's thread serves them.
  if (passed_over_ || unpolled_requests_ > 0) recall_ = true;
  passed_over_ = false;
}

void EventLoop::UnpolledRequestStarted() {
  MutexLock lock(&mu_);
  ++unpolled_requests_;
  // A waiter that polls now hands the sockets back as it leaves (StopPolling sees the count); a
  // recall meanwhile would only wake the loop's thread to find the sockets still held.
  if (!waiter_polling_) recall_ = true;
}

void EventLoop::UnpolledRequestEnded() {
  MutexLock lock(&mu_);
  --unpolled_requests_;
}

bool EventLoop::HandleWaiterBatch() {
  turn_.Lock();
  TurnHeld held(turn_, this);
  {
    MutexLock lock(&mu_);
    // Past Stop the owner may be gone; its teardown completes what waits.
    if (stopping_) return false;
  }
  epoll_event events[kEventsPerWait];
  const int n = epoll_wait(epoll_.get(), events, kEventsPerWait, 0);
  // A wake-up in the batch was meant for this thread: the loop's thread does not wait in epoll
  // while a waiter polls.
  Dispatch(events, n, waiter_on_event_);
  waiter_after_();
  return true;
}

}  // namespace hmc
