#ifndef HMC_TESTS_TESTING_RAW_SOCKET_H_
#define HMC_TESTS_TESTING_RAW_SOCKET_H_

// Helpers for tests that misbehave on purpose: connect to a service and send it anything.
#include <sys/socket.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/frame_io.h"
#include "core/socket.h"
#include "core/stream_io.h"

namespace hmc::testing_util {

inline UniqueFd Dial(const SocketAddress& address) {
  auto fd = ConnectTcp(address, absl::Now() + absl::Seconds(10));
  return fd.ok() ? std::move(*fd) : UniqueFd();
}

inline void SendBytes(int fd, const std::vector<uint8_t>& bytes) {
  WriteFully(fd, bytes, absl::Now() + absl::Seconds(10)).IgnoreError();
}

// A valid frame header whose payload length is far beyond any limit.
inline std::vector<uint8_t> OversizedHeader(FrameType type) {
  FrameHeader h;
  h.type = type;
  h.payload_bytes = uint64_t{1} << 50;
  h.total_bytes = h.payload_bytes;
  std::vector<uint8_t> header(kFrameHeaderBytes);
  EncodeFrameHeader(h, std::span<uint8_t, kFrameHeaderBytes>(header.data(), kFrameHeaderBytes));
  return header;
}

// Reads until the service closes the connection (or 10 s pass) and returns what it sent.
inline std::string ReadUntilClosed(int fd) {
  std::string out;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (;;) {
    uint8_t buffer[4096];
    auto s = ReadFully(fd, std::span<uint8_t>(buffer, 1), deadline);
    if (!s.ok()) return out;
    out.push_back(static_cast<char>(buffer[0]));
  }
}

// How many descriptors this process holds open.
inline int OpenDescriptors() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_RAW_SOCKET_H_
