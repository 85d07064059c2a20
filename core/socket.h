#ifndef HMC_CORE_SOCKET_H_
#define HMC_CORE_SOCKET_H_

#include <sys/socket.h>

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hmc {

// Raises this process's soft limit on open descriptors to its hard limit. Each peer costs
// `streams` sockets, so a large group outgrows the usual soft limit of 1024; a coordinator or
// launcher serving many ranks does too.
void RaiseDescriptorLimit();

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();
  void Reset();

 private:
  int fd_ = -1;
};

// An IPv4 or IPv6 socket address. Text form: "1.2.3.4:80", "[::1]:80" or "name:80".
class SocketAddress {
 public:
  static absl::StatusOr<SocketAddress> Parse(absl::string_view host_port);
  static absl::StatusOr<SocketAddress> FromSockaddr(const sockaddr* addr, socklen_t len);
  static absl::StatusOr<SocketAddress> LocalOf(int fd);
  static absl::StatusOr<SocketAddress> PeerOf(int fd);

  const sockaddr* raw() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const { return length_; }
  int family() const { return storage_.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t port);
  std::string host() const;
  std::string ToString() const;
  // Loopback, private (RFC 1918, RFC 6598 shared, IPv6 unique local) or link-local: an address
  // whose traffic stays inside one site or cloud network.
  bool private_or_loopback() const;

 private:
  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};

// The local address this host would use to reach `remote` (a connected UDP socket: nothing is
// sent), port 0.
absl::StatusOr<SocketAddress> LocalAddressTowards(const SocketAddress& remote);

// A listening TCP socket (SO_REUSEADDR, non-blocking) bound to `address` (port 0: any free port).
// `buffer_bytes` > 0 sets SO_SNDBUF/SO_RCVBUF, which accepted sockets inherit.
absl::StatusOr<UniqueFd> ListenTcp(const SocketAddress& address, int backlog = 512,
                                   int64_t buffer_bytes = 0);

// Connects within the deadline; the returned socket is non-blocking with TCP_NODELAY set.
// `buffer_bytes` > 0 sets SO_SNDBUF/SO_RCVBUF before connecting, so the window scale fits them.
absl::StatusOr<UniqueFd> ConnectTcp(const SocketAddress& address, absl::Time deadline,
                                    int64_t buffer_bytes = 0);

// Unix domain stream sockets in Linux's abstract namespace, which is scoped to the network
// namespace: a name is reachable exactly by processes that share this host's network stack.
absl::StatusOr<UniqueFd> ListenUnix(const std::string& abstract_name, int64_t buffer_bytes = 0);
absl::StatusOr<UniqueFd> ConnectUnix(const std::string& abstract_name, absl::Time deadline,
                                     int64_t buffer_bytes = 0);

absl::Status SetNonBlocking(int fd);
absl::Status SetNoDelay(int fd);
// A TCP connection that cannot deliver for `timeout` fails: sent data unacknowledged that long
// (TCP_USER_TIMEOUT), or an idle connection whose peer stops answering keepalive probes (a probe
// after a third of it, then two more a sixth apart). Catches vanished hosts and links that drop
// everything silently, which otherwise take the kernel's 15 minutes.
absl::Status SetLiveness(int fd, absl::Duration timeout);
// Sets TCP_USER_TIMEOUT alone: how long sent data may stay unacknowledged before the connection
// fails (zero: the kernel's retries). Linux counts a receiver's zero window against it too, so a
// live peer that stops reading looks like a vanished one after `timeout`.
absl::Status SetUnacknowledgedTimeout(int fd, absl::Duration timeout);
// Sets SO_SNDBUF and SO_RCVBUF; 0 leaves the kernel's autotuning on.
absl::Status SetBufferSizes(int fd, int64_t bytes);
// Sets TCP_CONGESTION (a listener's choice is inherited by the sockets it accepts); empty: no-op.
absl::Status SetCongestionControl(int fd, const std::string& algorithm);

// Waits until `fd` is ready for `events` (poll's), at most until the deadline.
absl::Status WaitReady(int fd, short events, absl::Time deadline, absl::string_view what);

// Milliseconds until the deadline for poll/epoll_wait: 0 if past, capped, -1 for InfiniteFuture.
int PollTimeoutMs(absl::Time deadline);

}  // namespace hmc

#endif  // HMC_CORE_SOCKET_H_
