#ifndef HMC_TESTS_TESTING_MAN_IN_THE_MIDDLE_H_
#define HMC_TESTS_TESTING_MAN_IN_THE_MIDDLE_H_

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"

namespace hmc::testing_util {

// The man in the middle: a process that accepts one connection, dials the real acceptor (whose
// port it reads from a pipe) and forwards both ways. It flips one bit of the byte at `flip_at`
// of the connector's bytes (none if negative), and exits with 1 if the connector's bytes ever
// showed `marker`, 0 if not.
class ManInTheMiddle {
 public:
  ManInTheMiddle(int64_t flip_at, const uint8_t* marker, size_t marker_bytes) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(any);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
    EXPECT_EQ(listen(listener_, 4), 0);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&any), &length);
    port_ = ntohs(any.sin_port);
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    // Forked before the transports start their threads: the child calls no allocator.
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[1]);
      Forward(fds[0], flip_at, marker, marker_bytes);
    }
    close(fds[0]);
    to_child_ = fds[1];
  }
  ~ManInTheMiddle() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(listener_);
    close(to_child_);
  }

  std::string address() const { return absl::StrFormat("127.0.0.1:%d", port_); }
  void ForwardTo(uint16_t port) { EXPECT_EQ(write(to_child_, &port, sizeof(port)), 2); }
  // Whether the connector's bytes showed the marker; waits for the connections to close.
  bool SawMarker() {
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
    waited_ = true;
    EXPECT_TRUE(WIFEXITED(status)) << status;
    return WIFEXITED(status) && WEXITSTATUS(status) == 1;
  }

 private:
  [[noreturn]] void Forward(int from_parent, int64_t flip_at, const uint8_t* marker,
                            size_t marker_bytes) {
    alarm(60);  // Bounded, whatever happens.
    uint16_t port = 0;
    if (read(from_parent, &port, sizeof(port)) != sizeof(port)) _exit(3);
    const int connector = accept(listener_, nullptr, nullptr);
    const int acceptor = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(port);
    if (connector < 0 || connect(acceptor, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
      _exit(4);
    }
    static uint8_t buffer[1 << 16];
    int64_t offset = 0;  // Of the connector's bytes.
    bool seen = false;
    bool open[2] = {true, true};  // connector -> acceptor, acceptor -> connector.
    while (open[0] || open[1]) {
      pollfd p[2] = {{connector, static_cast<short>(open[0] ? POLLIN : 0), 0},
                     {acceptor, static_cast<short>(open[1] ? POLLIN : 0), 0}};
      if (poll(p, 2, 1000) < 0) _exit(5);
      for (int d = 0; d < 2; ++d) {
        if (!open[d] || (p[d].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const int from = d == 0 ? connector : acceptor;
        const int into = d == 0 ? acceptor : connector;
        const ssize_t n = read(from, buffer, sizeof(buffer));
        if (n <= 0) {
          open[d] = false;
          shutdown(into, SHUT_WR);
          continue;
        }
        if (d == 0) {
          if (flip_at >= offset && flip_at < offset + n) buffer[flip_at - offset] ^= 0x20;
          seen = seen || memmem(buffer, static_cast<size_t>(n), marker, marker_bytes) != nullptr;
          offset += n;
        }
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t k = send(into, buffer + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
          if (k <= 0) break;
          sent += k;
        }
      }
    }
    _exit(seen ? 1 : 0);
  }

  int listener_ = -1;
  int to_child_ = -1;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool waited_ = false;
};

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_MAN_IN_THE_MIDDLE_H_
