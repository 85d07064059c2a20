#ifndef HMC_TESTS_TESTING_POLLED_LOOP_H_
#define HMC_TESTS_TESTING_POLLED_LOOP_H_

// An event loop run by a thread of its own with waiters let in (EventLoop::Drive), a socket pair
// whose events it handles, and a bounded wait for what another thread handles: for the tests of
// waiters that poll.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/event_loop.h"

namespace hmc::testing_util {

// A loop whose thread runs RunOnce until stopped, with waiters let in.
class PolledLoop {
 public:
  explicit PolledLoop(std::function<void(epoll_data_t, uint32_t)> on_event,
                      absl::Duration hold = EventLoop::kWaiterHold) {
    absl::StatusOr<std::unique_ptr<EventLoop>> made = EventLoop::Create();
    EXPECT_TRUE(made.ok()) << made.status();
    loop_ = *std::move(made);
    loop_->LetWaitersPoll(
        on_event, [] {}, hold);
    thread_ = std::thread([this, on_event] {
      loop_thread_ = std::this_thread::get_id();
      started_.Notify();
      while (loop_->RunOnce(100, on_event)) {
      }
    });
    started_.WaitForNotification();
  }
  ~PolledLoop() {
    loop_->Stop();
    thread_.join();
  }
  PolledLoop(const PolledLoop&) = delete;
  PolledLoop& operator=(const PolledLoop&) = delete;
  EventLoop& operator*() { return *loop_; }
  EventLoop* operator->() { return loop_.get(); }
  // What requests of the loop hold (Request::loop).
  std::weak_ptr<EventLoop> weak() const { return loop_; }
  std::thread::id loop_thread() const { return loop_thread_; }

 private:
  std::shared_ptr<EventLoop> loop_;
  absl::Notification started_;
  std::thread::id loop_thread_;
  std::thread thread_;
};

// Bytes written to `to`, read back on whichever thread handles the event of `from`.
struct SocketPair {
  SocketPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    from = UniqueFd(fds[0]);
    to = UniqueFd(fds[1]);
  }
  void Send() { EXPECT_EQ(write(to.get(), "x", 1), 1); }
  void Drain() {
    char c;
    while (read(from.get(), &c, 1) == 1) {
    }
  }
  UniqueFd from, to;
};

// A socket pair watched by a PolledLoop of its own: whether its last byte arrived, and on which
// thread it was handled.
struct WatchedPair {
  explicit WatchedPair(absl::Duration hold = EventLoop::kWaiterHold)
      : loop(
            [this](epoll_data_t, uint32_t) {
              pair.Drain();
              handled_on = std::this_thread::get_id();
              arrived = true;
            },
            hold) {
    loop->Watch(pair.from.get(), epoll_data_t{.u64 = 1}, EPOLLIN);
  }
  SocketPair pair;
  std::atomic<bool> arrived{false};
  std::thread::id handled_on;
  PolledLoop loop;  // Last: its thread handles the members above.
};

// Whether `flag` is set within 20 s (what another thread handles).
inline bool WithinTwentySeconds(const std::atomic<bool>& flag) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!flag && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return flag;
}

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_POLLED_LOOP_H_
