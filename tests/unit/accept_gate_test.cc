// The accept gate when the process runs out of descriptors: the listener leaves the epoll set
// (so a level-triggered loop does not spin on a connection it cannot take) and comes back after
// the pause, when the pending connection is taken.
#include "core/accept_gate.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "absl/time/clock.h"

namespace hmc {
namespace {

int Ready(int epoll) {
  epoll_event events[4];
  return epoll_wait(epoll, events, 4, 0);
}

TEST(AcceptGate, PausesWhileOutOfDescriptorsAndResumes) {
  auto bind = SocketAddress::Parse("127.0.0.1:0");
  ASSERT_TRUE(bind.ok());
  absl::StatusOr<UniqueFd> listener = ListenTcp(*bind);
  ASSERT_TRUE(listener.ok());
  auto address = SocketAddress::LocalOf(listener->get());
  ASSERT_TRUE(address.ok());
  UniqueFd epoll(epoll_create1(EPOLL_CLOEXEC));
  epoll_event event{};
  event.events = EPOLLIN;
  AcceptGate gate(epoll.get(), listener->get(), event);
  absl::StatusOr<UniqueFd> client = ConnectTcp(*address, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(client.ok());
  ASSERT_EQ(Ready(epoll.get()), 1);

  // No descriptor left for accept4: the limit is the lowest free number, so every allowed one is
  // taken.
  const int lowest_free = dup(0);
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  EXPECT_FALSE(gate.Next().has_value());
  EXPECT_TRUE(gate.out_of_descriptors());
  EXPECT_EQ(Ready(epoll.get()), 0);  // Level-triggered epoll would report it again and again.
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);

  gate.Tick(absl::Now());  // Too early: still paused.
  EXPECT_EQ(Ready(epoll.get()), 0);
  gate.Tick(absl::Now() + AcceptGate::kPause);
  EXPECT_FALSE(gate.out_of_descriptors());
  ASSERT_EQ(Ready(epoll.get()), 1);
  std::optional<UniqueFd> accepted = gate.Next();
  ASSERT_TRUE(accepted.has_value());
  EXPECT_TRUE(accepted->valid());
}

}  // namespace
}  // namespace hmc
