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
#include "absl/time/time.h"
#include "core/mutex.h"
#include "core/socket.h"

namespace hmc {

// The loop of a thread that owns sockets: an epoll set, an eventfd that wakes it, and work that
// other threads post to it. The coordinator's thread and the TCP transport's progress thread each
// run one. Watch, Modify, Unwatch and RunOnce belong to the loop's work (its thread's, or a caller
// RunHereOrPost or Drive lets in); Post, RunHereOrPost, RunExclusively, Drive and Stop to any
// thread.
//
// Waiters that poll (leader/follower). Where the owner allows it (LetWaitersPoll), a thread that
// waits for something the loop's events complete may take the sockets over from the loop's thread
// (Drive): it then waits in epoll itself and handles what arrives, so the data it waits for wakes
// it directly, not the loop's thread, which then wakes it (one thread hand-off per message fewer).
// One thread polls at a time. While a waiter polls, the loop's thread stays off the sockets and
// runs posted work (and the owner's checks) only. It takes them back kWaiterHold after the last
// waiter left (waits follow each other closely in a run of calls, and each take-over from the
// loop's thread costs a wake of it), or at once when recalled: while requests that nobody polls
// for are in flight (UnpolledRequestStarted: at once, and after every waiter that polls meanwhile),
// and when a waiter leaves after another waiter was passed over. A recall ends the hold until a
// waiter polls again.
class EventLoop {
 public:
  static constexpr absl::Duration kWaiterHold = absl::Milliseconds(2);
  enum class Driven {
    kDone,      // `done` held.
    kDeadline,  // The deadline passed first.
    kNotHere,   // Another thread polls, the loop stops or lets no waiter poll: wait otherwise.
  };

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
  // Runs `work` at once on the calling thread where no thread runs the loop's work (its thread
  // waits for events, or a waiter polls) and no posted work is pending (the caller then does what
  // that thread would be woken for, one thread hand-off fewer, in the same order), else posts it.
  // From work the loop runs: posts.
  void RunHereOrPost(std::function<void()> work);
  // Runs `work` on the calling thread with the loop's state to itself: no RunOnce handles events
  // and no caller runs work meanwhile (a teardown after the loop's thread ended).
  void RunExclusively(absl::FunctionRef<void()> work);
  // RunOnce returns false from the next call on.
  void Stop();

  // Lets waiters poll (Drive), handling events with `on_event` and `after` as the loop's thread
  // passes them to RunOnce; the loop's thread takes the sockets back `hold` after the last
  // waiter left. Once, before the loop's thread starts.
  void LetWaitersPoll(std::function<void(epoll_data_t data, uint32_t events)> on_event,
                      std::function<void()> after, absl::Duration hold = kWaiterHold);
  // How a polling waiter keeps asking epoll, without sleeping, before it sleeps in it: what
  // arrives meanwhile costs no wake-up of this thread.
  struct Spin {
    absl::Duration time;  // Zero (the default): none.
    // Gives the CPU away (sched_yield) after each empty poll: where threads outnumber the cores,
    // the thread it waits for may need this one's core, and a yield hands it over for less than
    // a sleep and a wake-up do. Such a spin follows only a short wait (see WaitForReady).
    bool yield = false;
  };
  void SetWaiterSpin(Spin spin);
  // Waits until `done()` or the deadline, polling the loop's sockets on this thread where no other
  // thread does (see the class comment). `done` is checked after each batch of events and after
  // whatever work another thread runs for the loop meanwhile, which wakes this thread.
  Driven Drive(absl::Time deadline, absl::FunctionRef<bool()> done);
  // A request of the loop's owner whose waiter sleeps (Request::LeaveToLoopThread: a large
  // transfer, a point-to-point call), from its start to its end. While any is in flight the loop's
  // thread serves the sockets: it takes them back at once, not kWaiterHold after the last waiter
  // left, and a waiter that polls meanwhile hands them straight back as it leaves. Requests whose
  // waiters poll are not counted: their waiters come back to poll for them (a multi-step
  // algorithm's next receive), and a recall after each step would cost two wakes of the loop's
  // thread per step.
  void UnpolledRequestStarted();
  void UnpolledRequestEnded();

  // Waits up to `timeout_ms` for events, hands each to `on_event`, runs the work posted so far,
  // then `after` (the owner's own checks, with the loop's state to itself as for the rest). False,
  // at once, once Stop was called.
  bool RunOnce(
      int timeout_ms, absl::FunctionRef<void(epoll_data_t data, uint32_t events)> on_event,
      absl::FunctionRef<void()> after = [] {});

 private:
  EventLoop() = default;
  void Wake();
  // Under mu_: whether the loop's thread polls this turn (see the class comment); it may wait for
  // up to `longest` first.
  bool LoopMayPoll(absl::Duration longest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands a batch's events to `on_event`; the wake-up's own event only resets it.
  void Dispatch(const epoll_event* events, int n,
                absl::FunctionRef<void(epoll_data_t data, uint32_t events)> on_event);
  // A waiter leaves the sockets; the loop's thread comes back at once where another was passed
  // over.
  void StopPolling() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After work that may have completed what a polling waiter waits for: wakes it to look.
  void WakePollingWaiter();
  // A polling waiter's wait for something ready, spinning first; false on an error.
  bool WaitForReady(absl::Time until, Spin spin);
  // A polling waiter's batch: takes the turn, then the events (under the turn, so that no other
  // work of the loop can retire what an event points at in between), and handles them. False once
  // the loop stops.
  bool HandleWaiterBatch();

  UniqueFd epoll_;
  UniqueFd wake_;  // Its events carry this address: no caller's data can equal it.
  // Held by whichever thread runs the loop's work (handles events, runs posted work, or runs
  // work here for RunHereOrPost): what the loop's state needs no other lock for. Not while a
  // thread waits in epoll.
  Mutex turn_;
  Mutex mu_;
  std::vector<std::function<void()>> posted_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Waiters that poll. The handlers are set before any thread uses them and not changed after.
  std::function<void(epoll_data_t, uint32_t)> waiter_on_event_;
  std::function<void()> waiter_after_;
  bool loop_polling_ ABSL_GUARDED_BY(mu_) = false;    // The loop's thread, until its batch is done.
  bool waiter_polling_ ABSL_GUARDED_BY(mu_) = false;  // A waiter in Drive.
  absl::Time waiter_left_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // The last one.
  absl::Duration waiter_hold_ ABSL_GUARDED_BY(mu_) = kWaiterHold;
  Spin waiter_spin_ ABSL_GUARDED_BY(mu_);
  // How long the last polling waiter's WaitForReady took. Only the polling waiter touches it, one
  // at a time (waiter_polling_, under mu_, orders them).
  absl::Duration last_ready_wait_;
  int64_t unpolled_requests_ ABSL_GUARDED_BY(mu_) = 0;
  bool passed_over_ ABSL_GUARDED_BY(mu_) = false;  // A waiter found another polling.
  bool recall_ ABSL_GUARDED_BY(mu_) = false;       // The loop's thread is wanted back now.
};

}  // namespace hmc

#endif  // HMC_CORE_EVENT_LOOP_H_
