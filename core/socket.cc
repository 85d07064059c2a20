#include "core/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hmc {

void RaiseDescriptorLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrFormat("%s: %s", what, std::strerror(errno)));
}

}  // namespace

absl::Status WaitReady(int fd, short events, absl::Time deadline, absl::string_view what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, PollTimeoutMs(deadline));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return Errno(what);
    if (n == 0 && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat("%s: deadline exceeded", what));
    }
  }
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.Release();
  }
  return *this;
}

UniqueFd::~UniqueFd() { Reset(); }

int UniqueFd::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::StatusOr<SocketAddress> SocketAddress::Parse(absl::string_view host_port) {
  std::string host;
  absl::string_view port_text;
  if (!host_port.empty() && host_port.front() == '[') {
    const size_t close = host_port.find(']');
    if (close == absl::string_view::npos || close + 1 >= host_port.size() ||
        host_port[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrFormat("address '%s': expected [ipv6]:port", host_port));
    }
    host = std::string(host_port.substr(1, close - 1));
    port_text = host_port.substr(close + 2);
  } else {
    const size_t colon = host_port.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrFormat("address '%s': expected host:port", host_port));
    }
    host = std::string(host_port.substr(0, colon));
    port_text = host_port.substr(colon + 1);
  }
  uint32_t port;
  if (!absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat("address '%s': bad port", host_port));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.empty() ? "0.0.0.0" : host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("address '%s': cannot resolve host: %s", host_port, gai_strerror(rc)));
  }
  auto parsed = FromSockaddr(result->ai_addr, result->ai_addrlen);
  freeaddrinfo(result);
  if (parsed.ok()) parsed->set_port(static_cast<uint16_t>(port));
  return parsed;
}

absl::StatusOr<SocketAddress> SocketAddress::FromSockaddr(const sockaddr* addr, socklen_t len) {
  if (len > sizeof(sockaddr_storage) ||
      (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
    return absl::InvalidArgumentError("not an IPv4 or IPv6 address");
  }
  SocketAddress out;
  std::memcpy(&out.storage_, addr, len);
  out.length_ = len;
  return out;
}

absl::StatusOr<SocketAddress> SocketAddress::LocalOf(int fd) {
  sockaddr_storage storage{};
  socklen_t len = sizeof(storage);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &len) != 0) {
    return Errno("getsockname");
  }
  return FromSockaddr(reinterpret_cast<sockaddr*>(&storage), len);
}

absl::StatusOr<SocketAddress> LocalAddressTowards(const SocketAddress& remote) {
  UniqueFd fd(socket(remote.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  if (connect(fd.get(), remote.raw(), remote.length()) != 0) {
    return Errno(absl::StrCat("no route to ", remote.host()));
  }
  absl::StatusOr<SocketAddress> local = SocketAddress::LocalOf(fd.get());
  if (local.ok()) local->set_port(0);
  return local;
}

absl::StatusOr<SocketAddress> SocketAddress::PeerOf(int fd) {
  sockaddr_storage storage{};
  socklen_t len = sizeof(storage);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &len) != 0) {
    return Errno("getpeername");
  }
  return FromSockaddr(reinterpret_cast<sockaddr*>(&storage), len);
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
}

void SocketAddress::set_port(uint16_t port) {
  if (family() == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
  }
}

std::string SocketAddress::host() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, text,
              sizeof(text));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, text,
              sizeof(text));
  }
  return text;
}

bool SocketAddress::private_or_loopback() const {
  if (family() == AF_INET) {
    const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr);
    auto in = [a](uint32_t net, int bits) { return (a >> (32 - bits)) == (net >> (32 - bits)); };
    return in(0x7f000000, 8) || in(0x0a000000, 8) || in(0xac100000, 12) || in(0xc0a80000, 16) ||
           in(0xa9fe0000, 16) || in(0x64400000, 10);
  }
  if (family() != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a)) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    std::memcpy(&v4.sin_addr, a.s6_addr + 12, 4);
    absl::StatusOr<SocketAddress> mapped =
        FromSockaddr(reinterpret_cast<const sockaddr*>(&v4), sizeof(v4));
    return mapped.ok() && mapped->private_or_loopback();
  }
  return IN6_IS_ADDR_LOOPBACK(&a) || IN6_IS_ADDR_LINKLOCAL(&a) || (a.s6_addr[0] & 0xfe) == 0xfc;
}

std::string SocketAddress::ToString() const {
  if (family() == AF_INET6) return absl::StrFormat("[%s]:%d", host(), port());
  return absl::StrFormat("%s:%d", host(), port());
}

absl::StatusOr<UniqueFd> ListenTcp(const SocketAddress& address, int backlog,
                                   int64_t buffer_bytes) {
  UniqueFd fd(socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  if (absl::Status s = SetBufferSizes(fd.get(), buffer_bytes); !s.ok()) return s;
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), address.raw(), address.length()) != 0) {
    return Errno(absl::StrFormat("bind %s", address.ToString()));
  }
  if (listen(fd.get(), backlog) != 0) return Errno("listen");
  return fd;
}

namespace {

// Connects a fresh non-blocking socket of `family` to `address` within the deadline.
absl::StatusOr<UniqueFd> ConnectSocket(int family, const sockaddr* address, socklen_t length,
                                       absl::Time deadline, int64_t buffer_bytes,
                                       const std::string& what) {
  UniqueFd fd(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  if (absl::Status s = SetBufferSizes(fd.get(), buffer_bytes); !s.ok()) return s;
  if (connect(fd.get(), address, length) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) return Errno(what);
    if (absl::Status s = WaitReady(fd.get(), POLLOUT, deadline, what); !s.ok()) return s;
    int error = 0;
    socklen_t len = sizeof(error);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      errno = error;
      return Errno(what);
    }
  }
  return fd;
}

}  // namespace

absl::StatusOr<UniqueFd> ConnectTcp(const SocketAddress& address, absl::Time deadline,
                                    int64_t buffer_bytes) {
  absl::StatusOr<UniqueFd> fd =
      ConnectSocket(address.family(), address.raw(), address.length(), deadline, buffer_bytes,
                    absl::StrFormat("connect to %s", address.ToString()));
  if (!fd.ok()) return fd;
  if (absl::Status s = SetNoDelay(fd->get()); !s.ok()) return s;
  return fd;
}

namespace {

absl::StatusOr<sockaddr_un> AbstractAddress(const std::string& name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat("bad local socket name '%s'", name));
  }
  // sun_path[0] = '\0' selects the abstract namespace; the name is not NUL-terminated.
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

}  // namespace

absl::StatusOr<UniqueFd> ListenUnix(const std::string& abstract_name, int64_t buffer_bytes) {
  socklen_t length = 0;
  absl::StatusOr<sockaddr_un> address = AbstractAddress(abstract_name, &length);
  if (!address.ok()) return address.status();
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket(AF_UNIX)");
  if (absl::Status s = SetBufferSizes(fd.get(), buffer_bytes); !s.ok()) return s;
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&*address), length) != 0) {
    return Errno(absl::StrFormat("bind local:%s", abstract_name));
  }
  if (listen(fd.get(), 1024) != 0) return Errno("listen");
  return fd;
}

absl::StatusOr<UniqueFd> ConnectUnix(const std::string& abstract_name, absl::Time deadline,
                                     int64_t buffer_bytes) {
  socklen_t length = 0;
  absl::StatusOr<sockaddr_un> address = AbstractAddress(abstract_name, &length);
  if (!address.ok()) return address.status();
  return ConnectSocket(AF_UNIX, reinterpret_cast<const sockaddr*>(&*address), length, deadline,
                       buffer_bytes, absl::StrFormat("connect to local:%s", abstract_name));
}

absl::Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return Errno("fcntl");
  return absl::OkStatus();
}

absl::Status SetNoDelay(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return Errno("TCP_NODELAY");
  }
  return absl::OkStatus();
}

absl::Status SetUnacknowledgedTimeout(int fd, absl::Duration timeout) {
  const int user_timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms))) {
    return Errno("TCP_USER_TIMEOUT");
  }
  return absl::OkStatus();
}

absl::Status SetLiveness(int fd, absl::Duration timeout) {
  if (absl::Status set = SetUnacknowledgedTimeout(fd, timeout); !set.ok()) return set;
  const int one = 1;
  const int idle_s = std::max<int>(1, static_cast<int>(absl::ToInt64Seconds(timeout / 3)));
  const int interval_s = std::max<int>(1, static_cast<int>(absl::ToInt64Seconds(timeout / 6)));
  const int probes = 2;
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s)) ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s)) ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes))) {
    return Errno("SO_KEEPALIVE");
  }
  return absl::OkStatus();
}

absl::Status SetBufferSizes(int fd, int64_t bytes) {
  if (bytes <= 0) return absl::OkStatus();
  const int size = static_cast<int>(std::min<int64_t>(bytes, 1 << 30));
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) != 0) {
    return Errno("SO_SNDBUF/SO_RCVBUF");
  }
  return absl::OkStatus();
}

absl::Status SetCongestionControl(int fd, const std::string& algorithm) {
  if (algorithm.empty()) return absl::OkStatus();
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, algorithm.data(),
                 static_cast<socklen_t>(algorithm.size())) != 0) {
    return Errno(
        absl::StrFormat("TCP congestion control '%s' (available: "
                        "/proc/sys/net/ipv4/tcp_available_congestion_control)",
                        algorithm));
  }
  return absl::OkStatus();
}

int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000000));
}

}  // namespace hmc
