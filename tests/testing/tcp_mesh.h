#ifndef HMC_TESTS_TESTING_TCP_MESH_H_
#define HMC_TESTS_TESTING_TCP_MESH_H_

// Ranks of real TcpTransports in one process, fully connected over loopback, and messages
// exchanged between them with their contents checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "transports/tcp/tcp_transport.h"

namespace hmc::testing_util {

inline constexpr char kToken[] = "transport-token";

struct Mesh {
  std::vector<std::unique_ptr<TcpTransport>> transports;
  std::vector<std::vector<std::shared_ptr<Channel>>> channels;  // [rank][peer]
};

inline TcpTransportConfig Config(const std::string& bind, int streams,
                                 const std::string& token = kToken, bool local_sockets = true) {
  TcpTransportConfig config;
  config.local_sockets = local_sockets;
  config.bind = bind;
  config.token = token;
  config.world_id = "t";
  config.limits.streams = streams;
  config.limits.stripe_min_bytes = 4096;
  config.limits.epoch = 1;
  config.handshake_timeout = absl::Seconds(2);
  return config;
}

// local: peers use Unix domain sockets (they share this network namespace); else TCP.
// `configure` may adjust each rank's configuration before its transport is created.
inline Mesh Connect(int n, int streams, bool local = false, const std::string& bind = "127.0.0.1:0",
                    const std::function<void(int, TcpTransportConfig&)>& configure = nullptr) {
  Mesh mesh;
  std::vector<PeerAddress> peers;
  for (int r = 0; r < n; ++r) {
    TcpTransportConfig config = Config(bind, streams, kToken, local);
    if (configure) configure(r, config);
    auto t = TcpTransport::Create(config);
    EXPECT_TRUE(t.ok()) << t.status();
    peers.push_back(PeerAddress{r, (*t)->address(), absl::StrFormat("rank %d", r)});
    mesh.transports.push_back(std::move(*t));
  }
  mesh.channels.resize(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto channels = mesh.transports[r]->ConnectAll(r, peers, absl::Now() + absl::Seconds(20));
      ASSERT_TRUE(channels.ok()) << channels.status();
      mesh.channels[r] = *channels;
    });
  }
  for (auto& t : threads) t.join();
  return mesh;
}

inline std::vector<uint8_t> Pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed);
  return v;
}

// Two messages of `bytes` between ranks 0 and 1 under tags `tag` and `tag` + 1: a's receive is
// posted first, b is sent first (so it arrives unexpected). Receives take `capacity` bytes, as
// RecvUpTo where `up_to`, and must report the length sent. Any transport's mesh: what it needs is
// `mesh.channels[rank][peer]`.
template <typename AnyMesh>
void ExchangeBothWays(AnyMesh& mesh, uint64_t tag, size_t bytes, size_t capacity, bool up_to) {
  const std::vector<uint8_t> a = Pattern(bytes, 1), b = Pattern(bytes, 2);
  std::vector<uint8_t> got_a(capacity), got_b(capacity);
  auto receive = [&](Channel& channel, uint64_t t, std::vector<uint8_t>& into) {
    return up_to ? channel.RecvUpTo(t, into.data(), capacity)
                 : channel.Recv(t, into.data(), capacity);
  };
  auto recv_a = receive(*mesh.channels[1][0], tag, got_a);
  auto send_a = mesh.channels[0][1]->Send(tag, a.data(), bytes);
  auto send_b = mesh.channels[1][0]->Send(tag + 1, b.data(), bytes);
  absl::SleepFor(absl::Milliseconds(20));
  auto recv_b = receive(*mesh.channels[0][1], tag + 1, got_b);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (auto& r : {recv_a, send_a, send_b, recv_b}) ASSERT_TRUE(r->Wait(deadline).ok());
  EXPECT_EQ(recv_a->bytes(), bytes);
  EXPECT_EQ(recv_b->bytes(), bytes);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), got_a.begin())) << bytes;
  EXPECT_TRUE(std::equal(b.begin(), b.end(), got_b.begin())) << bytes;
}

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_TCP_MESH_H_
