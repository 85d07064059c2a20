#ifndef HMC_CORE_FRAME_SEAL_H_
#define HMC_CORE_FRAME_SEAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hmc {

// What protects a TCP stream's frames where TLS does not (option `integrity`).
//   kMac: a 16-byte AES-256-GMAC trailer over header and payload, keyed per stream and direction
//         from the handshake's nonces and the token, with the frame's sequence number as nonce:
//         forged, changed, replayed, reordered or dropped frames all fail.
//   kCrc: a 4-byte CRC-32 trailer: catches corruption on the way, not an attacker.
//   kOff: nothing beyond TCP's own checksum.
enum class FrameIntegrity : uint8_t { kOff = 0, kCrc = 1, kMac = 2 };

absl::StatusOr<FrameIntegrity> ParseFrameIntegrity(absl::string_view name);
absl::string_view FrameIntegrityName(FrameIntegrity integrity);

inline constexpr size_t kMaxSealBytes = 16;

// Seals (sender) or checks (receiver) the frames of one direction of one stream, in order.
// Each frame: Begin, Update over its bytes as they go by, then Finish or Verify.
class FrameSeal {
 public:
  // `key`: 32 bytes (used by kMac only).
  FrameSeal(FrameIntegrity integrity, absl::string_view key);
  ~FrameSeal();
  FrameSeal(const FrameSeal&) = delete;
  FrameSeal& operator=(const FrameSeal&) = delete;

  FrameIntegrity integrity() const { return integrity_; }
  // Length of the trailer that follows every frame's payload: 0, 4 or 16.
  size_t trailer_bytes() const;
  void Begin();
  void Update(std::span<const uint8_t> bytes);
  // Writes trailer_bytes() bytes.
  void Finish(std::span<uint8_t> trailer);
  // Seals a whole frame at once: appends its trailer to `frame`.
  void Append(std::vector<uint8_t>& frame);
  // Whether `trailer` is what Finish would have written (constant time).
  bool Verify(std::span<const uint8_t> trailer);

 private:
  struct Cipher;
  const FrameIntegrity integrity_;
  std::unique_ptr<Cipher> cipher_;  // kMac only.
  uint64_t sequence_ = 0;           // Of the next frame.
  uint32_t crc_ = 0;
};

}  // namespace hmc

#endif  // HMC_CORE_FRAME_SEAL_H_
