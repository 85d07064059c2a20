#ifndef HMC_CORE_STREAM_IO_H_
#define HMC_CORE_STREAM_IO_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
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

// How a connection's bytes reach its non-blocking socket: as they are, or through TLS. One
// caller at a time (TLS keeps one state for both directions): a transport's progress thread, the
// coordinator's loop, or a coordinator client under its lock.
class StreamIo {
 public:
  explicit StreamIo(int fd) : fd_(fd) {}
  virtual ~StreamIo() = default;
  int fd() const { return fd_; }
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
  // Blocking forms, each waiting for the socket at most until the deadline: the whole handshake,
  // all of `bytes` out, exactly `bytes.size()` bytes in.
  absl::Status FinishHandshake(absl::Time deadline);
  absl::Status WriteAll(std::span<const uint8_t> bytes, absl::Time deadline);
  absl::Status ReadAll(std::span<uint8_t> bytes, absl::Time deadline);
  // Says which protection the bytes get ("tls 1.3 (kernel)", "tls 1.3", "none").
  virtual std::string protection() const { return "none"; }

 private:
  const int fd_;
};

// The socket as it is.
class SocketIo : public StreamIo {
 public:
  explicit SocketIo(int fd) : StreamIo(fd) {}
  IoResult Write(std::span<const iovec> iov) override;
  IoResult Read(void* data, size_t bytes) override;
};

// The socket with a buffer in front of its reads, for a connection that only this object reads
// from for the rest of its life (what it read ahead is lost with it). A read of fewer than
// kReadAheadBytes takes what the socket holds, up to that many: a small frame's header, payload
// and seal then cost one recv, not three. Larger reads, once the buffer is empty, go straight to
// their destination. A read ahead that got less than it asked for emptied the socket, so the read
// after the buffer runs dry says kWouldBlock without the recv that would only say EAGAIN, and the
// one after that asks the socket again. Only for sockets watched level-triggered, which signal
// again what arrives meanwhile.
class BufferedSocketIo final : public SocketIo {
 public:
  static constexpr size_t kReadAheadBytes = 16 << 10;
  explicit BufferedSocketIo(int fd) : SocketIo(fd) {}
  IoResult Read(void* data, size_t bytes) override;
  bool buffered() const override { return begin_ < end_; }

 private:
  std::unique_ptr<uint8_t[]> buffer_;  // Allocated by the first read ahead.
  size_t begin_ = 0;                   // What is left to take: [begin_, end_).
  size_t end_ = 0;
  bool emptied_ = false;  // The last read ahead left the socket empty.
};

// Write or read exactly the span on a non-blocking socket as it is (SocketIo), waiting with poll
// until the deadline. A closed connection or the deadline ends it with an error.
absl::Status WriteFully(int fd, std::span<const uint8_t> bytes, absl::Time deadline);
absl::Status ReadFully(int fd, std::span<uint8_t> bytes, absl::Time deadline);

}  // namespace hmc

#endif  // HMC_CORE_STREAM_IO_H_
