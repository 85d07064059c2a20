#ifndef HMC_TRANSPORTS_PROGRESS_THREAD_H_
#define HMC_TRANSPORTS_PROGRESS_THREAD_H_

#include <atomic>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/mutex.h"

namespace hmc {

// The thread that alone calls into a communication library run in its single-thread mode (UCX's
// worker, libfabric's endpoint): other threads hand it work (Post), which it runs between
// progress calls. After its last event it polls briefly, then sleeps in the library's own wait
// (an event descriptor, a completion queue's wait object) until an event, a Wake, or its next
// timer: no busy loop.
class ProgressThread {
 public:
  // What the thread drives. Progress and Sleep run on the thread; Wake on any thread.
  struct Driver {
    // Progresses the library once; returns whether anything happened.
    std::function<bool()> progress;
    // Sleeps until the library has an event or Wake is called, at most `max_ms` (0: no sleep).
    std::function<void(int max_ms)> sleep;
    std::function<void()> wake;
  };

  ProgressThread() = default;
  // Stops the thread: work still posted runs first.
  ~ProgressThread() { Stop(); }
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  void Start(Driver driver);
  void Stop();
  // Runs `work` on the thread, in posting order.
  void Post(std::function<void()> work);
  // Runs `work` on the thread once `delay` has passed (as soon as it can after).
  void PostAfter(absl::Duration delay, std::function<void()> work);
  // Runs `work` on the thread and returns once it ran (at once where called on the thread).
  void RunAndWait(const std::function<void()>& work);
  bool OnThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Run();
  // Runs what was posted and the timers that are due; returns whether there was any.
  bool RunPosted();
  // Progresses and watches for posted work for a short while; returns whether either came.
  bool PollBriefly();
  // How long the thread may sleep: until the next timer, at most `cap`.
  int SleepMs(int cap);

  Driver driver_;
  std::atomic<bool> stop_{false};
  Mutex mu_;
  std::vector<std::function<void()>> posted_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, std::function<void()>> timers_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_PROGRESS_THREAD_H_
