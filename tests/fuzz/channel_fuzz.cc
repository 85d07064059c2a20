// The TCP channel's receive state machine: a rank's data stream after a real handshake, carrying
// whatever the input says (data stripes, offers to pull, close notices, ...), while the rank has
// receives of several sizes posted. Every input must end with the receives completed or failed,
// and nothing read or written outside what they posted.
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "tests/testing/hostile_peer.h"
#include "transports/tcp/tcp_transport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hmc;
  if (size < 4) return 0;
  TcpTransportConfig config;
  config.token = "fuzz-token";
  config.world_id = "f";
  config.local_sockets = false;
  config.max_unexpected_bytes = 1 << 20;
  config.limits.streams = 1;
  config.limits.epoch = 1;
  config.limits.max_frame_bytes = 1 << 20;
  // Unsealed, so that arbitrary bytes reach every state of the receive; the seal itself is
  // checked by the unit tests.
  config.limits.integrity = FrameIntegrity::kOff;
  auto victim = TcpTransport::Create(config);
  if (!victim.ok()) std::abort();
  auto address = SocketAddress::Parse((*victim)->tcp_address());
  std::vector<std::shared_ptr<Channel>> channels;
  std::thread connect([&] {
    auto c = (*victim)->ConnectAll(0, {{0, (*victim)->address(), "rank 0"}, {1, "x:1", "rank 1"}},
                                   absl::Now() + absl::Seconds(5));
    if (c.ok()) channels = *c;
  });
  absl::StatusOr<testing_util::HostileStream> stream =
      testing_util::HandshakeAs(*address, {"fuzz-token", "f", 1, 0, 1, 1, FrameIntegrity::kOff}, 0);
  connect.join();
  if (!stream.ok() || channels.size() != 2) std::abort();
  // The first three bytes size receives for tags 0, 1 and 2 (one of them "up to").
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<RequestPtr> receives;
  for (int tag = 0; tag < 3; ++tag) {
    buffers.emplace_back(static_cast<size_t>(data[tag]) * 97);
    receives.push_back(
        tag == 2 ? channels[1]->RecvUpTo(tag, buffers.back().data(), buffers.back().size())
                 : channels[1]->Recv(tag, buffers.back().data(), buffers.back().size()));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  WriteFully(stream->fd.get(), std::span<const uint8_t>(data + 3, size - 3), deadline)
      .IgnoreError();
  shutdown(stream->fd.get(), SHUT_WR);  // The channel sees the end of its stream: it must settle.
  for (const RequestPtr& r : receives) r->Wait(deadline).IgnoreError();
  for (const RequestPtr& r : receives) {
    if (!r->done()) std::abort();  // A receive left hanging after its stream ended.
  }
  return 0;
}
