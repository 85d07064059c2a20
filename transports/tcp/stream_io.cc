#include "transports/tcp/stream_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hmc {

absl::Status StreamIo::WriteAll(std::span<const uint8_t> bytes, int fd, absl::Time deadline) {
  size_t done = 0;
  for (;;) {
    IoResult r;
    if (pending_output()) {
      r = Flush();
    } else if (done < bytes.size()) {
      const iovec iov{const_cast<uint8_t*>(bytes.data() + done), bytes.size() - done};
      r = Write(std::span<const iovec>(&iov, 1));
      if (r.kind == IoResult::kDone) done += r.bytes;
    } else {
      return absl::OkStatus();
    }
    if (r.kind == IoResult::kFailed || r.kind == IoResult::kClosed) {
      return absl::UnavailableError(r.error.empty() ? "connection closed" : r.error);
    }
    if (r.kind == IoResult::kWouldBlock) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("send timed out");
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(left))));
    }
  }
}

IoResult SocketIo::Write(std::span<const iovec> iov) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov.data());
  msg.msg_iovlen = iov.size();
  const ssize_t sent = sendmsg(fd_, &msg, MSG_NOSIGNAL);
  if (sent >= 0) return IoResult{IoResult::kDone, static_cast<size_t>(sent), {}};
  if (errno == EAGAIN || errno == EINTR) return IoResult{IoResult::kWouldBlock, 0, {}};
  return IoResult{IoResult::kFailed, 0, std::strerror(errno)};
}

IoResult SocketIo::Read(void* data, size_t bytes) {
  const ssize_t n = recv(fd_, data, bytes, 0);
  if (n > 0) return IoResult{IoResult::kDone, static_cast<size_t>(n), {}};
  if (n == 0) return IoResult{IoResult::kClosed, 0, {}};
  if (errno == EAGAIN || errno == EINTR) return IoResult{IoResult::kWouldBlock, 0, {}};
  return IoResult{IoResult::kFailed, 0, std::strerror(errno)};
}

}  // namespace hmc
