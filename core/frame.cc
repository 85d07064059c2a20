#include "core/frame.h"

#include <zlib.h>

#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"

namespace hmc {
namespace {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

template <typename T>
void Put(uint8_t* out, size_t& offset, T value) {
  std::memcpy(out + offset, &value, sizeof(T));
  offset += sizeof(T);
}

template <typename T>
T Get(const uint8_t* in, size_t& offset) {
  T value;
  std::memcpy(&value, in + offset, sizeof(T));
  offset += sizeof(T);
  return value;
}

bool IsKnownType(uint8_t raw) {
  return (raw >= static_cast<uint8_t>(FrameType::kChallenge) &&
          raw <= static_cast<uint8_t>(FrameType::kJoinReady)) ||
         (raw >= static_cast<uint8_t>(FrameType::kPeerChallenge) &&
          raw <= static_cast<uint8_t>(FrameType::kStreamHold));
}

constexpr size_t kHeaderCrcOffset = kFrameHeaderBytes - 4;

}  // namespace

absl::string_view FrameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kChallenge:
      return "challenge";
    case FrameType::kJoin:
      return "join";
    case FrameType::kWelcome:
      return "welcome";
    case FrameType::kError:
      return "error";
    case FrameType::kPeerTable:
      return "peer-table";
    case FrameType::kKvPut:
      return "kv-put";
    case FrameType::kKvGet:
      return "kv-get";
    case FrameType::kKvValue:
      return "kv-value";
    case FrameType::kHeartbeat:
      return "heartbeat";
    case FrameType::kLeave:
      return "leave";
    case FrameType::kSuspect:
      return "suspect";
    case FrameType::kJoinReady:
      return "join-ready";
    case FrameType::kPeerChallenge:
      return "peer-challenge";
    case FrameType::kPeerHello:
      return "peer-hello";
    case FrameType::kPeerAccept:
      return "peer-accept";
    case FrameType::kData:
      return "data";
    case FrameType::kRendezvous:
      return "rendezvous";
    case FrameType::kRendezvousDone:
      return "rendezvous-done";
    case FrameType::kStreamsWanted:
      return "streams-wanted";
    case FrameType::kStreamHold:
      return "stream-hold";
  }
  return "unknown";
}

uint32_t Checksum(std::span<const uint8_t> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const uint8_t* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {  // zlib takes a uInt length.
    const uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, data, n);
    data += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

void EncodeFrameHeader(const FrameHeader& header, std::span<uint8_t, kFrameHeaderBytes> out) {
  uint8_t* p = out.data();
  size_t offset = 0;
  Put<uint32_t>(p, offset, kFrameMagic);
  Put<uint16_t>(p, offset, kProtocolVersion);
  Put<uint8_t>(p, offset, static_cast<uint8_t>(header.type));
  Put<uint8_t>(p, offset, header.flags);
  Put<uint64_t>(p, offset, header.tag);
  Put<uint32_t>(p, offset, header.epoch);
  Put<uint16_t>(p, offset, header.stripe);
  Put<uint16_t>(p, offset, header.stripes);
  Put<uint64_t>(p, offset, header.total_bytes);
  Put<uint64_t>(p, offset, header.payload_bytes);
  Put<uint32_t>(p, offset, header.payload_crc);
  const uint32_t crc = Checksum(std::span<const uint8_t>(p, kHeaderCrcOffset));
  Put<uint32_t>(p, offset, crc);
}

absl::StatusOr<FrameHeader> DecodeFrameHeader(std::span<const uint8_t, kFrameHeaderBytes> in,
                                              uint64_t max_payload_bytes) {
  const uint8_t* p = in.data();
  size_t offset = 0;
  const uint32_t magic = Get<uint32_t>(p, offset);
  if (magic != kFrameMagic) {
    return absl::DataLossError(
        absl::StrFormat("not an hmc frame (magic 0x%08x, expected 0x%08x)", magic, kFrameMagic));
  }
  const uint16_t version = Get<uint16_t>(p, offset);
  if (version != kProtocolVersion) {
    return absl::FailedPreconditionError(
        absl::StrFormat("protocol version mismatch: peer speaks version %d, this build speaks %d",
                        version, kProtocolVersion));
  }
  size_t crc_offset = kHeaderCrcOffset;
  const uint32_t stored_crc = Get<uint32_t>(p, crc_offset);
  if (stored_crc != Checksum(std::span<const uint8_t>(p, kHeaderCrcOffset))) {
    return absl::DataLossError("frame header checksum mismatch");
  }
  const uint8_t raw_type = Get<uint8_t>(p, offset);
  if (!IsKnownType(raw_type)) {
    return absl::DataLossError(absl::StrFormat("unknown frame type %d", raw_type));
  }
  FrameHeader header;
  header.type = static_cast<FrameType>(raw_type);
  header.flags = Get<uint8_t>(p, offset);
  header.tag = Get<uint64_t>(p, offset);
  header.epoch = Get<uint32_t>(p, offset);
  header.stripe = Get<uint16_t>(p, offset);
  header.stripes = Get<uint16_t>(p, offset);
  header.total_bytes = Get<uint64_t>(p, offset);
  header.payload_bytes = Get<uint64_t>(p, offset);
  header.payload_crc = Get<uint32_t>(p, offset);
  const uint64_t limit = header.type == FrameType::kData
                             ? max_payload_bytes
                             : std::min(max_payload_bytes, kMaxControlPayloadBytes);
  if (header.payload_bytes > limit) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s frame of %d bytes exceeds the limit of %d bytes",
                        FrameTypeName(header.type), header.payload_bytes, limit));
  }
  if (header.stripes == 0 || header.stripe >= header.stripes ||
      header.payload_bytes > header.total_bytes) {
    return absl::DataLossError(absl::StrFormat(
        "inconsistent frame: stripe %d of %d, %d payload bytes of a %d-byte message", header.stripe,
        header.stripes, header.payload_bytes, header.total_bytes));
  }
  return header;
}

absl::Status CheckPayload(const FrameHeader& header, std::span<const uint8_t> payload) {
  if ((header.flags & kFlagPayloadChecksum) == 0) {
    if (header.type == FrameType::kData) return absl::OkStatus();
    return absl::DataLossError(
        absl::StrFormat("%s frame without payload checksum", FrameTypeName(header.type)));
  }
  if (Checksum(payload) != header.payload_crc) {
    return absl::DataLossError(
        absl::StrFormat("%s frame payload checksum mismatch", FrameTypeName(header.type)));
  }
  return absl::OkStatus();
}

}  // namespace hmc
