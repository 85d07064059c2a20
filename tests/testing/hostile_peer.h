#ifndef HMC_TESTS_TESTING_HOSTILE_PEER_H_
#define HMC_TESTS_TESTING_HOSTILE_PEER_H_

// A peer that knows the token, completes the transport's handshake by hand on raw sockets, and
// then sends whatever frames a test wants: the insider the hardening tests defend against.
#include <sys/socket.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "core/coordinator_protocol.h"
#include "core/frame_io.h"
#include "core/frame_seal.h"
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
  FrameIntegrity integrity = FrameIntegrity::kMac;  // What the victim's settings say.
};

// A stream that passed the handshake, and the seal its frames need to get past the victim's check
// (null on local sockets, or with integrity off).
struct HostileStream {
  UniqueFd fd;
  std::shared_ptr<FrameSeal> seal;
  size_t trailer_bytes() const { return seal != nullptr ? seal->trailer_bytes() : 0; }

  // `header` and `payload` (any, consistent or not) as the next frame of this stream, sealed.
  std::vector<uint8_t> Frame(const FrameHeader& header, std::span<const uint8_t> payload = {}) {
    std::vector<uint8_t> bytes(kFrameHeaderBytes);
    EncodeFrameHeader(header,
                      std::span<uint8_t, kFrameHeaderBytes>(bytes.data(), kFrameHeaderBytes));
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    if (seal != nullptr) seal->Append(bytes);
    return bytes;
  }
};

// Runs the connector's side of the handshake on `fd` as stream `stream`. Returns the stream once
// the victim sent PeerAccept, or the victim's refusal as an error.
inline absl::StatusOr<HostileStream> HandshakeOn(absl::StatusOr<UniqueFd> fd,
                                                 const HostileIdentity& who, int stream) {
  if (!fd.ok()) return fd.status();
  PeerHello hello;
  hello.world_id = who.world_id;
  hello.rank = who.rank;
  hello.to_rank = who.to_rank;
  hello.stream = static_cast<uint16_t>(stream);
  hello.streams = static_cast<uint16_t>(who.streams);
  hello.epoch = who.epoch;
  hello.integrity = static_cast<uint8_t>(who.integrity);
  absl::StatusOr<StreamSecrets> secrets =
      ConnectorHandshake(fd->get(), hello, who.token, absl::Now() + absl::Seconds(10));
  if (!secrets.ok()) return secrets.status();
  HostileStream out;
  sockaddr_storage self{};
  socklen_t length = sizeof(self);
  getsockname(fd->get(), reinterpret_cast<sockaddr*>(&self), &length);
  if (self.ss_family != AF_UNIX && who.integrity != FrameIntegrity::kOff) {
    out.seal = std::make_shared<FrameSeal>(who.integrity, secrets->to_acceptor);
  }
  out.fd = std::move(*fd);
  return out;
}

// Dials `victim` over TCP and runs the handshake (HandshakeOn).
inline absl::StatusOr<HostileStream> HandshakeAs(const SocketAddress& victim,
                                                 const HostileIdentity& who, int stream) {
  return HandshakeOn(ConnectTcp(victim, absl::Now() + absl::Seconds(10)), who, stream);
}

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_HOSTILE_PEER_H_
