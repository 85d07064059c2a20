#include "core/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

namespace hmc {
namespace {

constexpr int kEventsPerWait = 128;

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
  bool first = false;
  {
    MutexLock lock(&mu_);
    first = posted_.empty();
    posted_.push_back(std::move(work));
  }
  // Work already waiting has woken the loop, which takes everything posted when it gets there:
  // one wake per batch spares the system call and the loop's extra turn.
  if (first) Wake();
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
      return;
    }
  }
  Post(std::move(work));
}

void EventLoop::RunExclusively(absl::FunctionRef<void()> work) {
  turn_.Lock();
  TurnHeld held(turn_, this);
  work();
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

bool EventLoop::RunOnce(int timeout_ms,
                        absl::FunctionRef<void(epoll_data_t data, uint32_t events)> on_event,
                        absl::FunctionRef<void()> after) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
  }
  epoll_event events[kEventsPerWait];
  const int n = epoll_wait(epoll_.get(), events, kEventsPerWait, timeout_ms);
  turn_.Lock();
  TurnHeld held(turn_, this);
  for (int i = 0; i < n; ++i) {
    if (events[i].data.ptr == &wake_) {
      uint64_t value;
      const ssize_t ignored = read(wake_.get(), &value, sizeof(value));
      (void)ignored;
      continue;
    }
    on_event(events[i].data, events[i].events);
  }
  std::vector<std::function<void()>> work;
  {
    MutexLock lock(&mu_);
    work.swap(posted_);
  }
  for (std::function<void()>& w : work) w();
  after();
  return true;
}

}  // namespace hmc
