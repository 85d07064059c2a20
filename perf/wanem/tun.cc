#include "perf/wanem/tun.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace hmc::wanem {

absl::StatusOr<UniqueFd> CreateTun(const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) {
    return absl::InvalidArgumentError(absl::StrFormat("bad interface name '%s'", name));
  }
  UniqueFd fd(open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::UnavailableError(absl::StrFormat("open /dev/net/tun: %s", std::strerror(errno)));
  }
  ifreq request{};
  request.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::memcpy(request.ifr_name, name.data(), name.size());
  if (ioctl(fd.get(), TUNSETIFF, &request) != 0) {
    return absl::UnavailableError(
        absl::StrFormat("creating TUN interface %s: %s", name, std::strerror(errno)));
  }
  return fd;
}

}  // namespace hmc::wanem
