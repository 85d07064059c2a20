#include "core/accept_gate.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/time/clock.h"
#include "core/log.h"

namespace hmc {

AcceptGate::AcceptGate(int epoll, int listener, epoll_event event)
    : epoll_(epoll), listener_(listener), event_(event) {
  epoll_ctl(epoll_, EPOLL_CTL_ADD, listener_, &event_);
}

std::optional<UniqueFd> AcceptGate::Next() {
  if (paused_) return std::nullopt;
  const int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) return UniqueFd(fd);
  if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
    if (!said_) {
      Logf("accept", "cannot accept: %s; pausing the listener for %s at a time",
           std::strerror(errno), absl::FormatDuration(kPause));
      said_ = true;
    }
    epoll_ctl(epoll_, EPOLL_CTL_DEL, listener_, nullptr);
    paused_ = true;
    resume_at_ = absl::Now() + kPause;
  }
  return std::nullopt;  // EAGAIN (none pending), or a connection that died while queued.
}

void AcceptGate::Tick(absl::Time now) {
  if (!paused_ || now < resume_at_) return;
  paused_ = false;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, listener_, &event_);
}

}  // namespace hmc
