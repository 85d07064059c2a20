// The collectives' worker pool and the works it completes: a waiter runs its own collective where
// no worker has started it, never one a worker took, and the pool ends only after such runs; a
// task held for its waiter is left to it, and started by a worker where nobody waits.
#include "collectives/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "collectives/work.h"

namespace hmc {
namespace {

constexpr absl::Duration kPatience = absl::Seconds(30);
// For std::future: Debian's Abseil is not built for TSan, so what its Notification orders is
// invisible to TSan; a promise's value is not.
constexpr std::chrono::seconds kPatienceChrono(30);

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

// A task held for its waiter is left to the waiter while workers idle; without a grace a worker
// takes it.
TEST(WorkerPool, AHeldTaskIsLeftToItsWaiterWhileWorkersIdle) {
  WorkerPool held(2, absl::Hours(1));
  std::thread::id ran_on;
  const WorkerPool::Ticket ticket =
      held.Submit([&] { ran_on = std::this_thread::get_id(); }, WorkerPool::Start::kForAWaiter);
  absl::SleepFor(absl::Milliseconds(50));  // Time enough for an idle worker to take it.
  EXPECT_TRUE(held.RunHereIfQueued(ticket));
  EXPECT_EQ(ran_on, std::this_thread::get_id());

  WorkerPool at_once(2);
  std::promise<std::thread::id> taken_on;
  const WorkerPool::Ticket taken = at_once.Submit(
      [&] { taken_on.set_value(std::this_thread::get_id()); }, WorkerPool::Start::kForAWaiter);
  std::future<std::thread::id> worker = taken_on.get_future();
  ASSERT_EQ(worker.wait_for(kPatienceChrono), std::future_status::ready);
  EXPECT_FALSE(at_once.RunHereIfQueued(taken));
  EXPECT_NE(worker.get(), std::this_thread::get_id());
}

// Nobody waits: a worker starts the held task once its grace is over, also after the pool stopped
// keeping time (a held task then wakes a worker to keep it), and a task held after it ends its
// hold at once.
TEST(WorkerPool, AHeldTaskNobodyWaitsForStartsOnAWorker) {
  constexpr absl::Duration kGrace = absl::Milliseconds(2);
  WorkerPool pool(2, kGrace);
  for (int round = 0; round < 3; ++round) {
    std::promise<std::thread::id> ran_on;
    pool.Submit([&] { ran_on.set_value(std::this_thread::get_id()); },
                WorkerPool::Start::kForAWaiter);
    std::future<std::thread::id> worker = ran_on.get_future();
    ASSERT_EQ(worker.wait_for(kPatienceChrono), std::future_status::ready) << "round " << round;
    EXPECT_NE(worker.get(), std::this_thread::get_id());
    // Past the time kept after a held task: the next one finds no worker keeping time.
    absl::SleepFor(kGrace * (WorkerPool::kKeepTimeGraces + 10));
  }

  WorkerPool long_grace(1, absl::Hours(1));
  absl::Notification first_ran;
  long_grace.Submit([&] { first_ran.Notify(); }, WorkerPool::Start::kForAWaiter);
  std::thread::id second_ran_on;
  const WorkerPool::Ticket second = long_grace.Submit(
      [&] { second_ran_on = std::this_thread::get_id(); }, WorkerPool::Start::kForAWaiter);
  EXPECT_TRUE(first_ran.WaitForNotificationWithTimeout(kPatience));
  EXPECT_TRUE(long_grace.RunHereIfQueued(second));
  EXPECT_EQ(second_ran_on, std::this_thread::get_id());
}

// Stop runs a held task at once, on a worker.
TEST(WorkerPool, StopRunsAHeldTask) {
  WorkerPool pool(1, absl::Hours(1));
  std::atomic<bool> ran{false};
  const WorkerPool::Ticket ticket =
      pool.Submit([&] { ran = true; }, WorkerPool::Start::kForAWaiter);
  pool.Stop();
  EXPECT_TRUE(ran.load());
  EXPECT_FALSE(pool.RunHereIfQueued(ticket));
}

TEST(Work, WaitRunsTheCollectiveOnTheWaitingThreadOnlyWithoutAnEarlierDeadline) {
  auto pool = std::make_shared<WorkerPool>(1);
  absl::Notification busy, release;
  pool->Submit([&] {
    busy.Notify();
    release.WaitForNotificationWithTimeout(kPatience);
  });
  ASSERT_TRUE(busy.WaitForNotificationWithTimeout(kPatience));
  auto work = std::make_shared<Work>();
  std::thread::id ran_on;
  const WorkerPool::Ticket ticket = pool->Submit([&ran_on, work] {
    ran_on = std::this_thread::get_id();
    work->Complete(absl::OkStatus(), CollectiveReport{});
  });
  work->QueuedAs(pool, ticket);
  // A wait with its own short deadline leaves the collective to the pool...
  EXPECT_TRUE(absl::IsDeadlineExceeded(work->Wait(absl::Now() + absl::Milliseconds(20))));
  EXPECT_FALSE(work->done());
  // ...one without runs it here.
  EXPECT_TRUE(work->Wait().ok());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  release.Notify();
}

// A work whose end is watched through OnDone (a libtorch future) starts on a worker at once,
// however long the grace it was held for.
TEST(Work, AWorkNobodyWaitsForStartsOnAWorkerAtOnce) {
  auto pool = std::make_shared<WorkerPool>(1, absl::Hours(1));
  auto work = std::make_shared<Work>();
  std::promise<std::thread::id> ran_on;
  const WorkerPool::Ticket ticket = pool->Submit(
      [&ran_on, work] {
        ran_on.set_value(std::this_thread::get_id());
        work->Complete(absl::OkStatus(), CollectiveReport{});
      },
      WorkerPool::Start::kForAWaiter);
  work->QueuedAs(pool, ticket);
  work->StartWithoutWaiter();
  std::future<std::thread::id> worker = ran_on.get_future();
  ASSERT_EQ(worker.wait_for(kPatienceChrono), std::future_status::ready);
  EXPECT_NE(worker.get(), std::this_thread::get_id());
  EXPECT_TRUE(work->Wait().ok());
}

}  // namespace
}  // namespace hmc
