// Point-to-point calls between two communicators of this process over TCP on loopback: a
// completion callback that blocks must not stall the network (it used to run on the transport's
// progress thread, where the next message then waited behind it).
#include <gtest/gtest.h>

#include <thread>

#include "collectives/communicator.h"
#include "core/coordinator.h"
#include "core/mutex.h"

namespace hmc {
namespace {

TEST(PointToPoint, ABlockingCompletionCallbackDoesNotStallTheNextMessage) {
  CoordinatorConfig config;
  config.world_size = 2;
  config.token = "point-to-point-test";  // Loopback only.
  auto coordinator = Coordinator::Start(config);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  Options options;
  options.coordinator = (*coordinator)->address().ToString();
  options.token = config.token;
  options.world_size = 2;
  options.probe = false;
  options.local_sockets = false;
  std::vector<std::unique_ptr<Communicator>> ranks(2);
  std::vector<std::thread> creating;
  for (int r = 0; r < 2; ++r) {
    creating.emplace_back([&, r] {
      Options mine = options;
      mine.rank = r;
      auto c = Communicator::Create(mine);
      ASSERT_TRUE(c.ok()) << c.status();
      ranks[r] = std::move(*c);
    });
  }
  for (auto& t : creating) t.join();
  ASSERT_TRUE(ranks[0] && ranks[1]);

  float first = 1, second = 2, got_first = 0, got_second = 0;
  Notification release, in_callback;
  std::shared_ptr<Work> recv_first = ranks[1]->Recv(Buffer{&got_first, 1}, 0);
  recv_first->OnDone([&](const absl::Status&) {
    in_callback.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(30));  // A user's slow continuation.
  });
  std::shared_ptr<Work> recv_second = ranks[1]->Recv(Buffer{&got_second, 1}, 0);
  ASSERT_TRUE(ranks[0]->Send(Buffer{&first, 1}, 1)->Wait(absl::Now() + absl::Seconds(10)).ok());
  ASSERT_TRUE(in_callback.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(ranks[0]->Send(Buffer{&second, 1}, 1)->Wait(absl::Now() + absl::Seconds(10)).ok());
  // Bounded only so that a regression fails instead of hanging; the message is there at once.
  const absl::Status second_arrived = recv_second->Wait(absl::Now() + absl::Seconds(10));
  release.Notify();
  ASSERT_TRUE(second_arrived.ok()) << second_arrived;
  EXPECT_EQ(got_first, 1);
  EXPECT_EQ(got_second, 2);
  EXPECT_TRUE(recv_first->Wait(absl::Now() + absl::Seconds(10)).ok());
}

}  // namespace
}  // namespace hmc
