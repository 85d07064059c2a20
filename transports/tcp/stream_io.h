#ifndef HMC_TRANSPORTS_TCP_STREAM_IO_H_
#define HMC_TRANSPORTS_TCP_STREAM_IO_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hmc {

struct IoResult {
  enum Kind { kDone, kWouldBlock, kClosed, kFailed };
  Kind kind = kDone;
  size_t bytes = 0;   // kDone: how many.
  std::string error;  // kFailed: why.
};

// How a stream's bytes reach its non-blocking socket: as they are, or through TLS. Progress
// thread only.
class StreamIo {
 public:
  virtual ~StreamIo() = default;
  // Advances a handshake that must finish before data flows (TLS). Returns the epoll events it
  // waits for, or 0 once done.
  virtual absl::StatusOr<uint32_t> Handshake() { return 0u; }
  // Takes bytes from the front of `iov` (possibly fewer than all).
  virtual IoResult Write(std::span<const iovec> iov) = 0;
  virtual IoResult Read(void* data, size_t bytes) = 0;
  // Bytes taken by Write that still wait for the socket; Flush pushes them on.
  virtual bool pending_output() const { return false; }
  virtual IoResult Flush() { return IoResult{}; }
  // Bytes that left the socket but were not read yet: the socket will not signal them again.
  virtual bool buffered() const { return false; }
  // Writes all of `bytes` (waiting for the socket, at most until the deadline): a last notice.
  absl::Status WriteAll(std::span<const uint8_t> bytes, int fd, absl::Time deadline);
  // Says which protection the bytes get ("tls 1.3 (kernel)", "tls 1.3", "none").
  virtual std::string protection() const { return "none"; }
};

// The socket as it is.
class SocketIo final : public StreamIo {
 public:
  explicit SocketIo(int fd) : fd_(fd) {}
  IoResult Write(std::span<const iovec> iov) override;
  IoResult Read(void* data, size_t bytes) override;

 private:
  const int fd_;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_STREAM_IO_H_
