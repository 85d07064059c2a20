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
#include "tests/testing/polled_loop.h"

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

using testing_util::PolledLoop;
using testing_util::SocketPair;
using testing_util::WatchedPair;
using testing_util::WithinTwentySeconds;

// The waiter takes the sockets from the loop's thread, which was polling, and the event it waits
// for is handled on its own thread. The byte is written only once the waiter polls (its first
// check of `done`), so the loop's thread cannot have taken it first.
TEST(EventLoop, AWaiterThatPollsHandlesTheEventItWaitsFor) {
  WatchedPair watched;
  absl::SleepFor(absl::Milliseconds(20));  // The loop's thread waits in epoll by now, or soon.
  bool sent = false;
  const EventLoop::Driven driven = watched.loop->Drive(absl::Now() + absl::Seconds(20), [&] {
    if (!sent) {
      watched.pair.Send();
      sent = true;
    }
    return watched.arrived.load();
  });
  EXPECT_EQ(driven, EventLoop::Driven::kDone);
  EXPECT_EQ(watched.handled_on, std::this_thread::get_id());
  EXPECT_NE(watched.handled_on, watched.loop.loop_thread());
}

// A waiter that spins before it sleeps (here for an hour) handles on its own thread what arrives
// meanwhile, and its spin ends with its wait: a wait with nothing to handle ends at its deadline,
// not at the spin's end.
TEST(EventLoop, ASpinningWaiterHandlesWhatArrivesAndStopsAtItsDeadline) {
  WatchedPair watched;
  watched.loop->SetWaiterSpin({.time = absl::Hours(1)});
  std::thread sender([&] {
    absl::SleepFor(absl::Milliseconds(20));
    watched.pair.Send();
  });
  EXPECT_EQ(
      watched.loop->Drive(absl::Now() + absl::Seconds(20), [&] { return watched.arrived.load(); }),
      EventLoop::Driven::kDone);
  sender.join();
  EXPECT_EQ(watched.handled_on, std::this_thread::get_id());
  EXPECT_EQ(watched.loop->Drive(absl::Now() + absl::Milliseconds(50), [] { return false; }),
            EventLoop::Driven::kDeadline);
}

// While a waiter polls, posted work still runs on the loop's thread, and what it completes ends
// the waiter's wait.
TEST(EventLoop, PostedWorkRunsOnTheLoopsThreadWhileAWaiterPolls) {
  PolledLoop loop([](epoll_data_t, uint32_t) {});
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  bool posted = false;
  const EventLoop::Driven driven = loop->Drive(absl::Now() + absl::Seconds(20), [&] {
    if (!posted) {
      loop->Post([&] {
        ran_on = std::this_thread::get_id();
        ran = true;
      });
      posted = true;
    }
    return ran.load();
  });
  EXPECT_EQ(driven, EventLoop::Driven::kDone);
  EXPECT_EQ(ran_on, loop.loop_thread());
}

// One waiter polls at a time: a second one is told to wait otherwise, and once the first leaves,
// the loop's thread polls again at once and handles the second one's event. The loop's thread
// would otherwise leave the sockets to waiters for an hour here: only the recall brings it back.
TEST(EventLoop, AWaiterPassedOverIsServedByTheLoopsThread) {
  SocketPair first, second;
  std::atomic<bool> first_arrived{false}, second_arrived{false};
  std::thread::id second_handled_on;
  PolledLoop loop(
      [&](epoll_data_t data, uint32_t) {
        if (data.u64 == 1) {
          first.Drain();
          first_arrived = true;
        } else {
          second.Drain();
          second_handled_on = std::this_thread::get_id();
          second_arrived = true;
        }
      },
      absl::Hours(1));
  loop->Watch(first.from.get(), epoll_data_t{.u64 = 1}, EPOLLIN);
  loop->Watch(second.from.get(), epoll_data_t{.u64 = 2}, EPOLLIN);
  EventLoop::Driven passed_over = EventLoop::Driven::kDone;
  bool tried = false;
  const EventLoop::Driven driven = loop->Drive(absl::Now() + absl::Seconds(20), [&] {
    if (!tried) {
      std::thread other([&] {
        passed_over = loop->Drive(absl::Now() + absl::Seconds(20), [] { return false; });
      });
      other.join();
      first.Send();
      tried = true;
    }
    return first_arrived.load();
  });
  EXPECT_EQ(driven, EventLoop::Driven::kDone);
  EXPECT_EQ(passed_over, EventLoop::Driven::kNotHere);
  // Nobody polls on this thread now: only the loop's thread can handle the second event.
  second.Send();
  ASSERT_TRUE(WithinTwentySeconds(second_arrived));
  EXPECT_EQ(second_handled_on, loop.loop_thread());
}

// After a waiter polled, the loop's thread leaves the sockets to waiters (for an hour here); a
// request whose waiter sleeps calls it back, and it handles the events, the second one too: the
// recall lasts beyond the loop's next turn.
TEST(EventLoop, AnUnpolledRequestBringsTheLoopsThreadBackFromItsHold) {
  WatchedPair watched(absl::Hours(1));
  ASSERT_EQ(watched.loop->Drive(absl::Now() + absl::Seconds(20), [] { return true; }),
            EventLoop::Driven::kDone);
  watched.loop->UnpolledRequestStarted();
  for (int message = 0; message < 2; ++message) {
    watched.arrived = false;
    watched.pair.Send();
    ASSERT_TRUE(WithinTwentySeconds(watched.arrived)) << "message " << message;
    EXPECT_EQ(watched.handled_on, watched.loop.loop_thread());
  }
  watched.loop->UnpolledRequestEnded();
}

// Without LetWaitersPoll (the coordinator's loop), and after Stop, nobody polls but the loop's
// own thread.
TEST(EventLoop, WaitersPollOnlyWhereLetInAndNotAfterStop) {
  absl::StatusOr<std::unique_ptr<EventLoop>> plain = EventLoop::Create();
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->Drive(absl::Now() + absl::Seconds(1), [] { return false; }),
            EventLoop::Driven::kNotHere);
  PolledLoop loop([](epoll_data_t, uint32_t) {});
  loop->Stop();
  EXPECT_EQ(loop->Drive(absl::Now() + absl::Seconds(1), [] { return false; }),
            EventLoop::Driven::kNotHere);
}

}  // namespace
}  // namespace hmc
