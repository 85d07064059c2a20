#include "transports/progress_thread.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "core/placement.h"

namespace hmc {
namespace {

// After its last event the thread polls this long before it sleeps: the steps of a rendezvous
// follow each other within microseconds, and a sleep and wake-up between each made a quarter of
// the cycles of a 1 MiB exchange over UCX (perf/RESULTS.md, "Transports").
constexpr absl::Duration kPollBeforeSleep = absl::Microseconds(50);
// The longest sleep: bounds one through events a library does not signal (its own timers).
constexpr int kMaxSleepMs = 100;

}  // namespace

void ProgressThread::Start(Driver driver) {
  driver_ = std::move(driver);
  thread_ = std::thread([this] { Run(); });
}

void ProgressThread::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  driver_.wake();
  thread_.join();
}

void ProgressThread::Post(std::function<void()> work) {
  {
    MutexLock lock(&mu_);
    posted_.push_back(std::move(work));
  }
  driver_.wake();
}

void ProgressThread::PostAfter(absl::Duration delay, std::function<void()> work) {
  {
    MutexLock lock(&mu_);
    timers_.emplace(absl::Now() + delay, std::move(work));
  }
  driver_.wake();  // The thread takes the timer into its sleep.
}

void ProgressThread::RunAndWait(const std::function<void()>& work) {
  if (OnThread()) {
    work();
    return;
  }
  Notification done;
  Post([&] {
    work();
    done.Notify();
  });
  // The thread runs what is posted until it stops, which only Stop asks.
  done.WaitForNotificationWithTimeout(absl::InfiniteDuration());
}

int ProgressThread::SleepMs(int cap) {
  MutexLock lock(&mu_);
  if (timers_.empty()) return cap;
  const int64_t until = absl::ToInt64Milliseconds(timers_.begin()->first - absl::Now()) + 1;
  return static_cast<int>(std::clamp<int64_t>(until, 0, cap));
}

bool ProgressThread::RunPosted() {
  std::vector<std::function<void()>> work;
  {
    MutexLock lock(&mu_);
    work.swap(posted_);
    const absl::Time now = absl::Now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      work.push_back(std::move(timers_.begin()->second));
      timers_.erase(timers_.begin());
    }
  }
  for (auto& w : work) w();
  return !work.empty();
}

bool ProgressThread::PollBriefly() {
  const absl::Time until = absl::Now() + kPollBeforeSleep;
  // Bounded by the clock: at most kPollBeforeSleep of polling before the thread sleeps.
  while (absl::Now() < until) {
    if (driver_.progress()) return true;
    MutexLock lock(&mu_);
    if (!posted_.empty()) return true;
  }
  return false;
}

void ProgressThread::Run() {
  BindThisThread(ThreadRole::kProgress);
  // Bounded by stop_: Stop sets it and wakes the thread.
  while (true) {
    const bool ran = RunPosted();
    while (driver_.progress()) {
    }
    if (stop_.load()) {
      if (!RunPosted()) return;
      continue;
    }
    if (ran) continue;  // Work posted may have started operations that need progress.
    if (PollBriefly()) continue;
    driver_.sleep(SleepMs(kMaxSleepMs));
  }
}

}  // namespace hmc
