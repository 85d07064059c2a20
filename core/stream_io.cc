#include "core/stream_io.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "core/socket.h"

namespace hmc {

absl::Status StreamIo::FinishHandshake(absl::Time deadline) {
  for (;;) {
    absl::StatusOr<uint32_t> wanted = Handshake();
    if (!wanted.ok()) return wanted.status();
    if (*wanted == 0) return absl::OkStatus();
    const short events = (*wanted & EPOLLOUT) ? POLLOUT : POLLIN;
    if (absl::Status s = WaitReady(fd_, events, deadline, "TLS handshake"); !s.ok()) return s;
  }
}

absl::Status StreamIo::WriteAll(std::span<const uint8_t> bytes, absl::Time deadline) {
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
      return absl::UnavailableError(
          absl::StrFormat("send: %s", r.error.empty() ? "connection closed" : r.error));
    }
    if (r.kind == IoResult::kWouldBlock) {
      if (absl::Status s = WaitReady(fd_, POLLOUT, deadline, "send"); !s.ok()) return s;
    }
  }
}

absl::Status StreamIo::ReadAll(std::span<uint8_t> bytes, absl::Time deadline) {
  size_t done = 0;
  while (done < bytes.size()) {
    IoResult r = Read(bytes.data() + done, bytes.size() - done);
    if (r.kind == IoResult::kDone) {
      done += r.bytes;
    } else if (r.kind == IoResult::kWouldBlock) {
      if (absl::Status s = WaitReady(fd_, POLLIN, deadline, "recv"); !s.ok()) return s;
    } else if (r.kind == IoResult::kClosed) {
      return absl::UnavailableError(
          absl::StrFormat("connection closed after %d of %d bytes", done, bytes.size()));
    } else {
      return absl::UnavailableError(absl::StrFormat("recv: %s", r.error));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFully(int fd, std::span<const uint8_t> bytes, absl::Time deadline) {
  return SocketIo(fd).WriteAll(bytes, deadline);
}

absl::Status ReadFully(int fd, std::span<uint8_t> bytes, absl::Time deadline) {
  return SocketIo(fd).ReadAll(bytes, deadline);
}

IoResult SocketIo::Write(std::span<const iovec> iov) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov.data());
  msg.msg_iovlen = iov.size();
  const ssize_t sent = sendmsg(fd(), &msg, MSG_NOSIGNAL);
  if (sent >= 0) return IoResult{IoResult::kDone, static_cast<size_t>(sent), {}};
  if (errno == EAGAIN || errno == EINTR) return IoResult{IoResult::kWouldBlock, 0, {}};
  return IoResult{IoResult::kFailed, 0, std::strerror(errno)};
}

IoResult SocketIo::Read(void* data, size_t bytes) {
  const ssize_t n = recv(fd(), data, bytes, 0);
  if (n > 0) return IoResult{IoResult::kDone, static_cast<size_t>(n), {}};
  if (n == 0) return IoResult{IoResult::kClosed, 0, {}};
  if (errno == EAGAIN || errno == EINTR) return IoResult{IoResult::kWouldBlock, 0, {}};
  return IoResult{IoResult::kFailed, 0, std::strerror(errno)};
}

IoResult BufferedSocketIo::Read(void* data, size_t bytes) {
  if (!buffered()) {
    if (bytes >= kReadAheadBytes) return SocketIo::Read(data, bytes);
    if (emptied_) {
      emptied_ = false;
      return IoResult{IoResult::kWouldBlock, 0, {}};
    }
    if (buffer_ == nullptr) buffer_ = std::make_unique<uint8_t[]>(kReadAheadBytes);
    const IoResult r = SocketIo::Read(buffer_.get(), kReadAheadBytes);
    if (r.kind != IoResult::kDone) return r;
    begin_ = 0;
    end_ = r.bytes;
    emptied_ = r.bytes < kReadAheadBytes;
  }
  const size_t taken = std::min(bytes, end_ - begin_);
  std::memcpy(data, buffer_.get() + begin_, taken);
  begin_ += taken;
  return IoResult{IoResult::kDone, taken, {}};
}

}  // namespace hmc
