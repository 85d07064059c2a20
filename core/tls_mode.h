#ifndef HMC_CORE_TLS_MODE_H_
#define HMC_CORE_TLS_MODE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/socket.h"

namespace hmc {

// When TCP streams run TLS 1.3 (option `tls`). kAuto: when either end's address is neither
// private nor loopback, i.e. where traffic may cross the public internet.
enum class TlsMode { kAuto, kOn, kOff };

absl::StatusOr<TlsMode> ParseTlsMode(absl::string_view name);
absl::string_view TlsModeName(TlsMode mode);
bool WantsTls(TlsMode mode, const SocketAddress& self, const SocketAddress& peer);

}  // namespace hmc

#endif  // HMC_CORE_TLS_MODE_H_
