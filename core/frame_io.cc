#include "core/frame_io.h"

#include <cstring>

namespace hmc {

std::vector<uint8_t> EncodeControlFrame(FrameType type, std::span<const uint8_t> payload,
                                        uint32_t epoch, uint64_t tag) {
  FrameHeader header;
  header.type = type;
  header.flags = kFlagPayloadChecksum;
  header.tag = tag;
  header.epoch = epoch;
  header.total_bytes = payload.size();
  header.payload_bytes = payload.size();
  header.payload_crc = Checksum(payload);
  std::vector<uint8_t> bytes(kFrameHeaderBytes + payload.size());
  EncodeFrameHeader(header, std::span<uint8_t, kFrameHeaderBytes>(bytes.data(), kFrameHeaderBytes));
  if (!payload.empty())
    std::memcpy(bytes.data() + kFrameHeaderBytes, payload.data(), payload.size());
  return bytes;
}

absl::Status WriteControlFrame(StreamIo& io, FrameType type, std::span<const uint8_t> payload,
                               absl::Time deadline) {
  return io.WriteAll(EncodeControlFrame(type, payload), deadline);
}

absl::StatusOr<Frame> ReadControlFrame(StreamIo& io, absl::Time deadline) {
  uint8_t raw[kFrameHeaderBytes];
  if (absl::Status s = io.ReadAll(raw, deadline); !s.ok()) return s;
  absl::StatusOr<FrameHeader> header = DecodeFrameHeader(raw, kMaxControlPayloadBytes);
  if (!header.ok()) return header.status();
  Frame frame{*header, std::vector<uint8_t>(header->payload_bytes)};
  if (absl::Status s = io.ReadAll(frame.payload, deadline); !s.ok()) return s;
  if (absl::Status s = CheckPayload(frame.header, frame.payload); !s.ok()) return s;
  return frame;
}

absl::Status WriteControlFrame(int fd, FrameType type, std::span<const uint8_t> payload,
                               absl::Time deadline) {
  SocketIo io(fd);
  return WriteControlFrame(io, type, payload, deadline);
}

absl::StatusOr<Frame> ReadControlFrame(int fd, absl::Time deadline) {
  SocketIo io(fd);
  return ReadControlFrame(io, deadline);
}

void FrameParser::Feed(std::span<const uint8_t> bytes) {
  if (consumed_ > 0 && consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

absl::StatusOr<std::optional<Frame>> FrameParser::Next() {
  if (!header_.has_value()) {
    if (buffered() < kFrameHeaderBytes) return std::nullopt;
    absl::StatusOr<FrameHeader> header = DecodeFrameHeader(
        std::span<const uint8_t, kFrameHeaderBytes>(buffer_.data() + consumed_, kFrameHeaderBytes),
        max_payload_bytes_);
    if (!header.ok()) return header.status();
    header_ = *header;
    consumed_ += kFrameHeaderBytes;
  }
  if (buffered() < header_->payload_bytes) return std::nullopt;
  Frame frame{*header_, std::vector<uint8_t>(buffer_.begin() + consumed_,
                                             buffer_.begin() + consumed_ + header_->payload_bytes)};
  consumed_ += header_->payload_bytes;
  header_.reset();
  if (absl::Status s = CheckPayload(frame.header, frame.payload); !s.ok()) return s;
  // Compact once most of the buffer is consumed so it does not grow without bound.
  if (consumed_ > 4096 && consumed_ * 2 > buffer_.size()) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + consumed_);
    consumed_ = 0;
  }
  return frame;
}

}  // namespace hmc
