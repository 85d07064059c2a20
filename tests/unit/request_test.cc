// Requests, the completions every transport hands out: callbacks run in order on the completing
// thread, and WaitForAll returns once every request completed, or false at its deadline.
#include "transports/request.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "absl/time/clock.h"

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

}  // namespace
}  // namespace hmc
