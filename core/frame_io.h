#ifndef HMC_CORE_FRAME_IO_H_
#define HMC_CORE_FRAME_IO_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/frame.h"
#include "core/socket.h"
#include "core/stream_io.h"

namespace hmc {

struct Frame {
  FrameHeader header;
  std::vector<uint8_t> payload;
};

// Encodes a control frame (payload checksummed) into one byte string.
std::vector<uint8_t> EncodeControlFrame(FrameType type, std::span<const uint8_t> payload,
                                        uint32_t epoch = 0, uint64_t tag = 0);

// Sends or receives one control frame on a non-blocking socket, as it is or through `io` (TLS),
// within the deadline.
absl::Status WriteControlFrame(StreamIo& io, FrameType type, std::span<const uint8_t> payload,
                               absl::Time deadline);
absl::StatusOr<Frame> ReadControlFrame(StreamIo& io, absl::Time deadline);
absl::Status WriteControlFrame(int fd, FrameType type, std::span<const uint8_t> payload,
                               absl::Time deadline);
absl::StatusOr<Frame> ReadControlFrame(int fd, absl::Time deadline);

// Reassembles control frames from bytes as they arrive on a non-blocking socket. A bad header
// or checksum is an error; the caller closes that connection.
class FrameParser {
 public:
  // Payloads longer than `max_payload_bytes` are refused from their header.
  explicit FrameParser(uint64_t max_payload_bytes = kMaxControlPayloadBytes)
      : max_payload_bytes_(max_payload_bytes) {}
  void set_max_payload_bytes(uint64_t bytes) { max_payload_bytes_ = bytes; }

  // Appends received bytes.
  void Feed(std::span<const uint8_t> bytes);
  // The next complete frame, nullopt when more bytes are needed, or an error.
  absl::StatusOr<std::optional<Frame>> Next();
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  uint64_t max_payload_bytes_;
  std::vector<uint8_t> buffer_;
  size_t consumed_ = 0;
  std::optional<FrameHeader> header_;
};

}  // namespace hmc

#endif  // HMC_CORE_FRAME_IO_H_
