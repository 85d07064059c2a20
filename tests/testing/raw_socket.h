#ifndef HMC_TESTS_TESTING_RAW_SOCKET_H_
#define HMC_TESTS_TESTING_RAW_SOCKET_H_

// Helpers for tests that misbehave on purpose: connect to a service and send it anything.
#include <sys/socket.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
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

// Whether a service's refusals (`recent`, e.g. its rejections()) come to hold every one of
// `texts` within 10 s. A refused client can see its failure before the service has recorded the
// refusal (a TLS alert goes out first), so a check made at once would race. Returns them all,
// joined, where some text never came, for the failure message.
inline std::string MissingRejections(const std::function<std::vector<std::string>()>& recent,
                                     const std::vector<std::string>& texts) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (;;) {
    const std::string all = absl::StrJoin(recent(), "\n");
    bool every = true;
    for (const std::string& text : texts) every = every && absl::StrContains(all, text);
    if (every) return "";
    if (absl::Now() > deadline) return all.empty() ? "(nothing was refused)" : all;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_RAW_SOCKET_H_
