// The epoll loop the coordinator and the TCP transport run: events come back with their data,
// posted work runs on the loop's thread in order, and Stop ends the loop.
#include "core/event_loop.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace hmc {
namespace {

TEST(EventLoop, EventsCarryTheirDataAndPostedWorkRunsOnTheLoopInOrder) {
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok()) << loop.status();
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd a(pair[0]), b(pair[1]);
  (*loop)->Watch(a.get(), epoll_data_t{.u64 = 42}, EPOLLIN);
  ASSERT_EQ(write(b.get(), "x", 1), 1);
  std::vector<uint64_t> seen;
  ASSERT_TRUE((*loop)->RunOnce(5000, [&](epoll_data_t data, uint32_t events) {
    EXPECT_TRUE(events & EPOLLIN);
    seen.push_back(data.u64);
  }));
  EXPECT_EQ(seen, std::vector<uint64_t>{42});

  (*loop)->Unwatch(a.get());
  std::vector<int> order;
  std::thread::id ran_on;
  std::thread poster([&] {
    for (int i = 0; i < 3; ++i) {
      (*loop)->Post([&, i] {
        order.push_back(i);
        ran_on = std::this_thread::get_id();
      });
    }
  });
  poster.join();
  // The wake-up of the posts ends the wait at once; the readable socket is no longer watched.
  seen.clear();
  ASSERT_TRUE(
      (*loop)->RunOnce(5000, [&](epoll_data_t data, uint32_t) { seen.push_back(data.u64); }));
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ran_on, std::this_thread::get_id());

  std::thread stopper([&] { (*loop)->Stop(); });
  stopper.join();
  EXPECT_FALSE((*loop)->RunOnce(5000, [](epoll_data_t, uint32_t) {}));
}

// Only a post into an empty queue wakes the loop (the rest ride on that wake): no post may be left
// waiting for a wake that never comes. Each poster waits for its post to run before the next, so
// the loop sleeps between posts and posters race each other and the loop's turns. The loop waits
// up to 60 s per turn and a poster 20 s for its post: a lost wake fails the poster's wait.
TEST(EventLoop, EveryPostWakesASleepingLoopWhilePostersRace) {
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok()) << loop.status();
  constexpr int kPosters = 3;
  constexpr int kPostsEach = 2000;
  std::atomic<int> lost{0};
  std::atomic<int> posters_left{kPosters};
  std::vector<std::thread> posters;
  for (int p = 0; p < kPosters; ++p) {
    posters.emplace_back([&] {
      for (int i = 0; i < kPostsEach; ++i) {
        auto ran = std::make_shared<absl::Notification>();
        (*loop)->Post([ran] { ran->Notify(); });
        if (!ran->WaitForNotificationWithTimeout(absl::Seconds(20))) {
          ++lost;
          break;
        }
      }
      if (--posters_left == 0) (*loop)->Stop();
    });
  }
  // Bounded: the last poster to finish stops the loop.
  for (int turn = 0; turn < 10 * kPosters * kPostsEach; ++turn) {
    if (!(*loop)->RunOnce(60000, [](epoll_data_t, uint32_t) {})) break;
  }
  for (std::thread& t : posters) t.join();
  EXPECT_EQ(lost.load(), 0) << "a post did not wake the loop";
}

}  // namespace
}  // namespace hmc
