// Requests, the completions every transport hands out: callbacks run in order on the completing
// thread, WaitForAll returns once every request completed, or false at its deadline, and a request
// left to its loop's thread keeps that thread on the sockets while it is in flight.
#include "transports/request.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "tests/testing/polled_loop.h"

namespace hmc {
namespace {

TEST(Request, CallbacksRunInOrderOnceWithTheOutcome) {
  Request r;
  std::vector<int> order;
  r.Then([&](const absl::Status& s) { order.push_back(s.ok() ? 1 : -1); });
  r.Then([&](const absl::Status& s) { order.push_back(s.ok() ? 2 : -2); });
  r.Complete(absl::UnavailableError("gone"));
  r.Complete(absl::OkStatus());  // Ignored: the first outcome wins.
  r.Then([&](const absl::Status& s) { order.push_back(s.ok() ? 3 : -3); });  // At once.
  EXPECT_EQ(order, (std::vector<int>{-1, -2, -3}));
}

TEST(WaitForAll, ReturnsOnceTheLastCompletesInAnyOrder) {
  std::vector<RequestPtr> requests;
  for (int i = 0; i < 5; ++i) requests.push_back(std::make_shared<Request>());
  requests[2]->Complete(absl::OkStatus());  // Done before the wait.
  std::thread completer([&] {
    for (int i : {4, 0, 3, 1}) {
      absl::SleepFor(absl::Milliseconds(5));
      requests[i]->Complete(i == 3 ? absl::InternalError("failed") : absl::OkStatus());
    }
  });
  EXPECT_TRUE(WaitForAll(requests, absl::Now() + absl::Seconds(30)));
  for (const RequestPtr& r : requests) EXPECT_TRUE(r->done());
  completer.join();
}

TEST(WaitForAll, ReturnsFalseAtTheDeadlineWhileOneIsStillRunning) {
  std::vector<RequestPtr> requests = {std::make_shared<Request>(), std::make_shared<Request>(),
                                      std::make_shared<Request>()};
  requests[0]->Complete(absl::OkStatus());
  requests[2]->Complete(absl::OkStatus());
  EXPECT_FALSE(WaitForAll(requests, absl::Now() + absl::Milliseconds(20)));
  requests.push_back(std::make_shared<Request>());
  EXPECT_FALSE(WaitForAll(requests, absl::Now() + absl::Milliseconds(20)));
  requests[1]->Complete(absl::OkStatus());
  requests[3]->Complete(absl::OkStatus());
  EXPECT_TRUE(WaitForAll(requests, absl::Now()));
  EXPECT_TRUE(WaitForAll({}, absl::Now()));
}

// A request whose waiter sleeps (a large transfer, a point-to-point call) brings the loop's thread
// back after every waiter that polled meanwhile, until it completes; then a waiter that leaves
// leaves the sockets to the next one for the hold (an hour here), as after a step of a multi-step
// algorithm, whose next receive's waiter comes back to poll.
TEST(Request, ARequestLeftToTheLoopsThreadBringsItBackAfterEachWaiterUntilItCompletes) {
  testing_util::WatchedPair watched(absl::Hours(1));
  auto waiter_polls_once = [&] {
    return watched.loop->Drive(absl::Now() + absl::Seconds(20), [] { return true; });
  };
  Request large(watched.loop.weak(), /*waiter_polls=*/false);
  large.LeaveToLoopThread();
  for (int waiter = 0; waiter < 2; ++waiter) {
    ASSERT_EQ(waiter_polls_once(), EventLoop::Driven::kDone);
    watched.arrived = false;
    watched.pair.Send();
    ASSERT_TRUE(testing_util::WithinTwentySeconds(watched.arrived)) << "after waiter " << waiter;
    EXPECT_EQ(watched.handled_on, watched.loop.loop_thread());
  }
  large.Complete(absl::OkStatus());
  ASSERT_EQ(waiter_polls_once(), EventLoop::Driven::kDone);
  watched.arrived = false;
  watched.pair.Send();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(watched.arrived)
      << "the loop's thread took the sockets back with nothing left to it";
  ASSERT_EQ(
      watched.loop->Drive(absl::Now() + absl::Seconds(20), [&] { return watched.arrived.load(); }),
      EventLoop::Driven::kDone);
  EXPECT_EQ(watched.handled_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace hmc
