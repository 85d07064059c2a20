#include "core/tls_mode.h"

#include "absl/strings/str_format.h"

namespace hmc {

absl::StatusOr<TlsMode> ParseTlsMode(absl::string_view name) {
  if (name == "auto") return TlsMode::kAuto;
  if (name == "on") return TlsMode::kOn;
  if (name == "off") return TlsMode::kOff;
  return absl::InvalidArgumentError(absl::StrFormat("tls must be auto, on or off, not '%s'", name));
}

absl::string_view TlsModeName(TlsMode mode) {
  switch (mode) {
    case TlsMode::kOn:
      return "on";
    case TlsMode::kOff:
      return "off";
    case TlsMode::kAuto:
      return "auto";
  }
  return "?";
}

bool WantsTls(TlsMode mode, const SocketAddress& self, const SocketAddress& peer) {
  switch (mode) {
    case TlsMode::kOn:
      return true;
    case TlsMode::kOff:
      return false;
    case TlsMode::kAuto:
      return !self.private_or_loopback() || !peer.private_or_loopback();
  }
  return true;
}

}  // namespace hmc
