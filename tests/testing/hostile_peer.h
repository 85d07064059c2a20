#ifndef HMC_TESTS_TESTING_HOSTILE_PEER_H_
#define HMC_TESTS_TESTING_HOSTILE_PEER_H_

// A peer that knows the token, completes the transport's handshake by hand on raw sockets, and
// then sends whatever frames a test wants: the insider the hardening tests defend against.
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "core/coordinator_protocol.h"
#include "core/frame_io.h"
#include "core/socket.h"
#include "transports/tcp/handshake.h"

namespace hmc::testing_util {

struct HostileIdentity {
  std::string token;
  std::string world_id;
  int rank = 0;
  int to_rank = 0;  // The victim's.
  int streams = 1;
  uint32_t epoch = 0;
};

// Runs the connector's side of the handshake on `fd` as stream `stream`. Returns the socket once
// the victim sent PeerAccept, or the victim's refusal as an error.
inline absl::StatusOr<UniqueFd> HandshakeOn(absl::StatusOr<UniqueFd> fd, const HostileIdentity& who,
                                            int stream) {
  if (!fd.ok()) return fd.status();
  PeerHello hello;
  hello.world_id = who.world_id;
  hello.rank = who.rank;
  hello.to_rank = who.to_rank;
  hello.stream = static_cast<uint16_t>(stream);
  hello.streams = static_cast<uint16_t>(who.streams);
  hello.epoch = who.epoch;
  if (absl::Status s =
          ConnectorHandshake(fd->get(), hello, who.token, absl::Now() + absl::Seconds(10));
      !s.ok()) {
    return s;
  }
  return fd;
}

// Dials `victim` over TCP and runs the handshake (HandshakeOn).
inline absl::StatusOr<UniqueFd> HandshakeAs(const SocketAddress& victim, const HostileIdentity& who,
                                            int stream) {
  return HandshakeOn(ConnectTcp(victim, absl::Now() + absl::Seconds(10)), who, stream);
}

// A data-stream frame with any header the test chooses (it need not be consistent).
inline std::vector<uint8_t> ForgedFrame(const FrameHeader& header,
                                        std::span<const uint8_t> payload = {}) {
  std::vector<uint8_t> bytes(kFrameHeaderBytes);
  EncodeFrameHeader(header, std::span<uint8_t, kFrameHeaderBytes>(bytes.data(), kFrameHeaderBytes));
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return bytes;
}

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_HOSTILE_PEER_H_
