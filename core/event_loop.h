#ifndef HMC_CORE_EVENT_LOOP_H_
#define HMC_CORE_EVENT_LOOP_H_

#include <sys/epoll.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/mutex.h"
#include "core/socket.h"

namespace hmc {

// The loop of a thread that owns sockets: an epoll set, an eventfd that wakes it, and work that
// other threads post to it. The coordinator's thread and the TCP transport's progress thread each
// run one. Watch, Modify, Unwatch and RunOnce belong to the loop's work (its thread's, or a caller
// RunHereOrPost lets in); Post, RunHereOrPost, RunExclusively and Stop to any thread.
class EventLoop {
 public:
  static absl::StatusOr<std::unique_ptr<EventLoop>> Create();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // For what adds its own registrations (AcceptGate).
  int epoll_fd() const { return epoll_.get(); }
  // `data` comes back with each event of `fd`.
  void Watch(int fd, epoll_data_t data, uint32_t events);
  void Modify(int fd, epoll_data_t data, uint32_t events);
  void Unwatch(int fd);

  // Runs `work` on the loop's thread, in order, after the events of the wait it interrupts.
  void Post(std::function<void()> work);
  // Runs `work` at once on the calling thread where the loop's thread is waiting for events and
  // no posted work is pending (the caller then does what that thread would be woken for, one
  // thread hand-off fewer, in the same order), else posts it. From work the loop runs: posts.
  void RunHereOrPost(std::function<void()> work);
  // Runs `work` on the calling thread with the loop's state to itself: no RunOnce handles events
  // and no caller runs work meanwhile (a teardown after the loop's thread ended).
  void RunExclusively(absl::FunctionRef<void()> work);
  // RunOnce returns false from the next call on.
  void Stop();

  // Waits up to `timeout_ms` for events, hands each to `on_event`, runs the work posted so far,
  // then `after` (the owner's own checks, with the loop's state to itself as for the rest). False,
  // at once, once Stop was called.
  bool RunOnce(
      int timeout_ms, absl::FunctionRef<void(epoll_data_t data, uint32_t events)> on_event,
      absl::FunctionRef<void()> after = [] {});

 private:
  EventLoop() = default;
  void Wake();

  UniqueFd epoll_;
  UniqueFd wake_;  // Its events carry this address: no caller's data can equal it.
  // Held by whichever thread runs the loop's work (handles events, runs posted work, or runs
  // work here for RunHereOrPost): what the loop's state needs no other lock for. Not while the
  // loop's thread waits in epoll.
  Mutex turn_;
  Mutex mu_;
  std::vector<std::function<void()>> posted_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hmc

#endif  // HMC_CORE_EVENT_LOOP_H_
