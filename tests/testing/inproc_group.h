#ifndef HMC_TESTS_TESTING_INPROC_GROUP_H_
#define HMC_TESTS_TESTING_INPROC_GROUP_H_

#include <gtest/gtest.h>

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

}  // namespace hmc

#endif  // HMC_TESTS_TESTING_INPROC_GROUP_H_
