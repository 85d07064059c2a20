#ifndef HMC_TESTS_TESTING_INPROC_GROUP_H_
#define HMC_TESTS_TESTING_INPROC_GROUP_H_

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "transports/inproc/inproc_transport.h"

namespace hmc {

// Runs body(rank, communicator) on `n` threads, one communicator each, over the inproc
// transport; `zones` names each rank's zone (cycled).
inline void RunGroup(int n, const std::function<void(int, Communicator&)>& body,
                     Options options = Options(), const std::vector<std::string>& zones = {}) {
  auto fabric = std::make_shared<InprocFabric>();
  std::vector<PeerAddress> peers;
  for (int r = 0; r < n; ++r) peers.push_back(PeerAddress{r, "", ""});
  options.chunk_bytes = 4096;  // Small segments exercise the pipelines.
  options.timeout = absl::Seconds(60);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      InprocTransport transport(fabric, r);
      auto channels = transport.ConnectAll(r, peers, absl::InfiniteFuture());
      ASSERT_TRUE(channels.ok());
      auto comm = Communicator::CreateFromChannels(r, *channels, options, zones);
      body(r, *comm);
    });
  }
  for (auto& t : threads) t.join();
}

// Every message each rank sent was received (`stats`: every rank's link_stats() after a last
// Barrier): nothing a call sent early was left on a link.
inline void ExpectEveryLinkDrained(const std::vector<std::vector<LinkStats>>& stats) {
  for (size_t from = 0; from < stats.size(); ++from) {
    for (size_t to = 0; to < stats.size(); ++to) {
      if (from == to) continue;
      EXPECT_EQ(stats[from][to].messages_sent, stats[to][from].messages_received)
          << "rank " << from << " to rank " << to;
    }
  }
}

// Waits (up to 30 s) for `flag`: a rank held back until another has looked at its links.
inline void WaitFor(const std::atomic<bool>& flag) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!flag.load() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
}

// Waits (up to 20 s) until this rank has sent rank `to` `expected` messages in all (link_stats),
// then 50 ms more for a message that should not leave: whether it sent exactly `expected`.
inline bool SentExactly(const Communicator& comm, int to, uint64_t expected) {
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (comm.link_stats()[to].messages_sent < expected && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  absl::SleepFor(absl::Milliseconds(50));
  return comm.link_stats()[to].messages_sent == expected;
}

}  // namespace hmc

#endif  // HMC_TESTS_TESTING_INPROC_GROUP_H_
