#ifndef HMC_CORE_MUTEX_H_
#define HMC_CORE_MUTEX_H_

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER
#include <sanitizer/tsan_interface.h>
#endif

namespace hmc {

// Debian builds its Abseil without NDEBUG, which leaves Abseil's lock-order cycle detection on:
// every absl::Mutex::Lock then records the lock in a process-wide graph (`GraphCycles` in the
// profile of a 4-rank loopback all-reduce; perf/RESULTS.md, "Ranks that share cores"). Builds of
// hmc with NDEBUG (Release, RelWithDebInfo, the sanitizer builds; TSan finds lock-order inversions
// there) switch it off for the process; Debug builds keep it. Called by whatever starts hmc's
// threads (a communicator, a coordinator).
void SkipMutexCycleDetectionInReleaseBuilds();

// absl::Mutex as hmc uses it, visible to ThreadSanitizer. Debian's Abseil is a prebuilt shared
// library without TSan instrumentation, so TSan cannot see the happens-before edges its Mutex
// creates and reports every guarded access as a race. In TSan builds (GCC's or clang's: Abseil's
// ABSL_HAVE_THREAD_SANITIZER knows both, while clang 14 does not define __SANITIZE_THREAD__) this
// wrapper announces them (__tsan_acquire after taking the lock, __tsan_release before letting it
// go, also around the condition checks Await runs under the lock); in other builds it adds
// nothing.
class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    Acquired();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    Releasing();
    mu_.Unlock();
  }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    if (!mu_.TryLock()) return false;
    Acquired();
    return true;
  }
  // Waits, with the lock held, until `condition` is true.
  void Await(const absl::Condition& condition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitWithDeadline(condition, absl::InfiniteFuture());
  }
  // As Await, but gives up at the deadline; returns whether the condition holds.
  bool AwaitWithDeadline(const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
#ifdef ABSL_HAVE_THREAD_SANITIZER
    struct Check {
      Mutex* mutex;
      const absl::Condition* condition;
    } check{this, &condition};
    Releasing();
    const bool met = mu_.AwaitWithDeadline(absl::Condition(
                                               +[](Check* c) {
                                                 c->mutex->Acquired();
                                                 const bool value = c->condition->Eval();
                                                 c->mutex->Releasing();
                                                 return value;
                                               },
                                               &check),
                                           deadline);
    Acquired();
    return met;
#else
    return mu_.AwaitWithDeadline(condition, deadline);
#endif
  }

 private:
  void Acquired() {
#ifdef ABSL_HAVE_THREAD_SANITIZER
    __tsan_acquire(this);
#endif
  }
  void Releasing() {
#ifdef ABSL_HAVE_THREAD_SANITIZER
    __tsan_release(this);
#endif
  }

  absl::Mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// absl::Notification built on hmc::Mutex, so that TSan sees what Notify orders before the wait
// returns (absl's own is as invisible to it as absl::Mutex).
class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  // Returns whether Notify was called before `timeout` passed.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithDeadline(absl::Condition(&notified_), absl::Now() + timeout);
  }

 private:
  mutable Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hmc

#endif  // HMC_CORE_MUTEX_H_
