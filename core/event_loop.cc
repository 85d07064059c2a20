#include "core/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

namespace hmc {
namespace {

constexpr int kEventsPerWait = 128;

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
                        absl::FunctionRef<void(epoll_data_t data, uint32_t events)> on_event) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
  }
  epoll_event events[kEventsPerWait];
  const int n = epoll_wait(epoll_.get(), events, kEventsPerWait, timeout_ms);
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
  return true;
}

}  // namespace hmc
