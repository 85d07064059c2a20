// The coordinator protocol against a live coordinator in this process, on loopback. Each input is
// one connection's bytes: sent straight after the challenge (a stranger), or after a real join
// (the harness proves the token, which the fuzzer could not), so that the frames of a joined
// rank (key-value requests, suspicions, join-ready, leave) are reached too.
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/auth.h"
#include "core/coordinator.h"
#include "core/coordinator_protocol.h"

namespace {

constexpr char kToken[] = "fuzz-token";

const hmc::SocketAddress& CoordinatorAddress() {
  static const hmc::SocketAddress* address = [] {
    hmc::CoordinatorConfig config;
    config.token = kToken;
    config.world_size = 1 << 12;  // Never complete: every join takes a free rank, freed on close.
    config.handshake_timeout = absl::Seconds(2);
    auto coordinator = hmc::Coordinator::Start(config);
    if (!coordinator.ok()) {
      std::fprintf(stderr, "%s\n", coordinator.status().ToString().c_str());
      std::abort();
    }
    return new hmc::SocketAddress(coordinator->release()->address());  // Lives for the run.
  }();
  return *address;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hmc;
  if (size == 0) return 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  absl::StatusOr<UniqueFd> fd = ConnectTcp(CoordinatorAddress(), deadline);
  if (!fd.ok()) return 0;
  absl::StatusOr<Frame> challenge = ReadControlFrame(fd->get(), deadline);
  if (!challenge.ok()) return 0;
  if (data[0] & 1) {
    JoinRequest join;
    join.world_id = "hmc";
    join.address = "fuzz:1";
    join.nonce = RandomNonce();
    join.proof = join.Proof(kToken, *ParseString(challenge->payload));
    if (!WriteControlFrame(fd->get(), FrameType::kJoin, join.Serialize(), deadline).ok()) return 0;
    absl::StatusOr<Frame> welcome = ReadControlFrame(fd->get(), deadline);
    if (!welcome.ok() || welcome->header.type != FrameType::kWelcome) std::abort();
  }
  WriteFully(fd->get(), std::span<const uint8_t>(data + 1, size - 1), deadline).IgnoreError();
  shutdown(fd->get(), SHUT_WR);
  // Until the coordinator closes: it has then handled every byte (or refused them).
  uint8_t sink[4096];
  while (ReadFully(fd->get(), std::span<uint8_t>(sink, 1), deadline).ok()) {
  }
  return 0;
}
