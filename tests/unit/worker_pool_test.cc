// The collectives' worker pool and the works it completes: a waiter runs its own collective where
// no worker has started it, never one a worker took, and the pool ends only after such runs.
#include "collectives/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "collectives/work.h"

namespace hmc {
namespace {

constexpr absl::Duration kPatience = absl::Seconds(30);

TEST(WorkerPool, AWaiterRunsATaskNoWorkerStartedAndNeverOneAWorkerTook) {
  WorkerPool pool(1);
  absl::Notification busy, release;
  std::thread::id first_ran_on;
  const WorkerPool::Ticket first = pool.Submit([&] {
    first_ran_on = std::this_thread::get_id();
    busy.Notify();
    release.WaitForNotificationWithTimeout(kPatience);
  });
  ASSERT_TRUE(busy.WaitForNotificationWithTimeout(kPatience));
  // The only worker is busy: the second task waits in the queue, and this thread takes it.
  std::thread::id second_ran_on;
  const WorkerPool::Ticket second =
      pool.Submit([&] { second_ran_on = std::this_thread::get_id(); });
  EXPECT_NE(first, second);
  EXPECT_FALSE(pool.RunHereIfQueued(first));  // Taken by the worker.
  EXPECT_TRUE(pool.RunHereIfQueued(second));
  EXPECT_EQ(second_ran_on, std::this_thread::get_id());
  EXPECT_FALSE(pool.RunHereIfQueued(second));  // Runs once.
  release.Notify();
  pool.Stop();
  EXPECT_NE(first_ran_on, std::this_thread::get_id());
}

TEST(WorkerPool, StopWaitsForARunOnAWaitersThreadAndRefusesLaterOnes) {
  auto pool = std::make_shared<WorkerPool>(1);
  absl::Notification worker_busy, release_worker;
  pool->Submit([&] {
    worker_busy.Notify();
    release_worker.WaitForNotificationWithTimeout(kPatience);
  });
  ASSERT_TRUE(worker_busy.WaitForNotificationWithTimeout(kPatience));
  absl::Notification running_here;
  std::atomic<bool> finished_here{false};
  const WorkerPool::Ticket slow = pool->Submit([&] {
    running_here.Notify();
    absl::SleepFor(absl::Milliseconds(200));
    finished_here = true;
  });
  std::atomic<bool> late_ran{false};
  const WorkerPool::Ticket late = pool->Submit([&] { late_ran = true; });
  std::thread waiter([&] { EXPECT_TRUE(pool->RunHereIfQueued(slow)); });
  ASSERT_TRUE(running_here.WaitForNotificationWithTimeout(kPatience));
  release_worker.Notify();
  pool->Stop();
  // Stop returned after the waiter's run, not during it, and the workers ran what was queued.
  EXPECT_TRUE(finished_here.load());
  EXPECT_TRUE(late_ran.load());
  EXPECT_FALSE(pool->RunHereIfQueued(late));  // Refused once stopped: it ran already.
  waiter.join();
}

TEST(Work, WaitRunsTheCollectiveOnTheWaitingThreadOnlyWithoutAnEarlierDeadline) {
  WorkerPool pool(1);
  absl::Notification busy, release;
  pool.Submit([&] {
    busy.Notify();
    release.WaitForNotificationWithTimeout(kPatience);
  });
  ASSERT_TRUE(busy.WaitForNotificationWithTimeout(kPatience));
  auto work = std::make_shared<Work>();
  std::thread::id ran_on;
  const WorkerPool::Ticket ticket = pool.Submit([&ran_on, work] {
    ran_on = std::this_thread::get_id();
    work->Complete(absl::OkStatus(), CollectiveReport{});
  });
  work->RunOnWait([&pool, ticket] { pool.RunHereIfQueued(ticket); });
  // A wait with its own short deadline leaves the collective to the pool...
  EXPECT_TRUE(absl::IsDeadlineExceeded(work->Wait(absl::Now() + absl::Milliseconds(20))));
  EXPECT_FALSE(work->done());
  // ...one without runs it here.
  EXPECT_TRUE(work->Wait().ok());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  release.Notify();
}

}  // namespace
}  // namespace hmc
