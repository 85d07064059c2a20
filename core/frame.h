#ifndef HMC_CORE_FRAME_H_
#define HMC_CORE_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hmc {

// Every byte hmc sends travels in frames: a fixed 48-byte little-endian header, then the payload.
// The header carries its own checksum; control payloads carry one too (data payloads rely on
// TCP's). Magic and version sit first so that any future layout can still be told apart and named.
inline constexpr uint32_t kFrameMagic = 0x31434d48;  // "HMC1"
// 3: sealed frames and TLS on data streams; 4: the argument check announces early data;
// 5: stream-count requests (kStreamsWanted); 6: joins and peer tables carry each host's CPUs.
inline constexpr uint16_t kProtocolVersion = 6;
inline constexpr size_t kFrameHeaderBytes = 48;
// Control frames (coordinator protocol, handshakes) are small; larger lengths are refused early.
inline constexpr uint64_t kMaxControlPayloadBytes = 16 << 20;
// Before a connection proved the token, far less: the frames of a handshake are small, and a flood
// of unauthenticated connections must not each hold megabytes.
inline constexpr uint64_t kMaxHandshakePayloadBytes = 64 << 10;

enum class FrameType : uint8_t {
  // Coordinator protocol.
  kChallenge = 1,  // server -> client: nonce.
  kJoin = 2,       // client -> server: identity, address, HMAC proof.
  kWelcome = 3,    // server -> client: rank, world, server proof.
  kError = 4,      // either way: a message, then the connection closes.
  kPeerTable = 5,  // server -> client: epoch and every live peer.
  kKvPut = 6,
  kKvGet = 7,
  kKvValue = 8,
  kHeartbeat = 9,
  kLeave = 10,
  kSuspect = 11,    // client -> server: a peer failed on the data path (Suspicion).
  kJoinReady = 12,  // client -> server: a rank joining a running group reached every member.
  // Peer-to-peer transport.
  kPeerChallenge = 16,
  kPeerHello = 17,
  kPeerAccept = 18,
  kData = 19,
  kRendezvous = 20,      // A large message the receiver pulls from the sender's memory.
  kRendezvousDone = 21,  // The receiver pulled it (or could not: the sender sends it instead).
  kStreamsWanted = 22,   // The receiver asks for a stream count for a size class (StreamAdapter).
  kStreamHold = 23,      // The receiver stopped or resumed reading a stream (TcpChannel::TellHold).
};

inline constexpr uint8_t kFlagPayloadChecksum = 1;

struct FrameHeader {
  FrameType type = FrameType::kData;
  uint8_t flags = 0;
  uint64_t tag = 0;
  uint32_t epoch = 0;
  uint16_t stripe = 0;       // This frame's stripe of a message striped over several streams.
  uint16_t stripes = 1;      // How many stripes the message has.
  uint64_t total_bytes = 0;  // Length of the whole message (all stripes).
  uint64_t payload_bytes = 0;
  uint32_t payload_crc = 0;
};

absl::string_view FrameTypeName(FrameType type);

void EncodeFrameHeader(const FrameHeader& header, std::span<uint8_t, kFrameHeaderBytes> out);

// Checks magic, version, header checksum, type and lengths (payload at most `max_payload_bytes`)
// before anything is allocated for the payload. Errors say what was wrong; callers add the peer.
absl::StatusOr<FrameHeader> DecodeFrameHeader(std::span<const uint8_t, kFrameHeaderBytes> in,
                                              uint64_t max_payload_bytes);

uint32_t Checksum(std::span<const uint8_t> bytes);

// Verifies the payload checksum of a control frame.
absl::Status CheckPayload(const FrameHeader& header, std::span<const uint8_t> payload);

}  // namespace hmc

#endif  // HMC_CORE_FRAME_H_
