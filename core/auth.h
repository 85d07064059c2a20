#ifndef HMC_CORE_AUTH_H_
#define HMC_CORE_AUTH_H_

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hmc {

// Challenge-response authentication with a shared token: each side sends a fresh nonce and proves
// it knows the token with HMAC-SHA256 over both nonces and a label; the token never crosses the
// wire. Both directions are proven, so a client also knows it reached the right service.
std::string RandomNonce();  // 32 random bytes from OpenSSL's CSPRNG.

// HMAC-SHA256(token, label || len-prefixed parts...), 32 bytes.
std::string ComputeProof(absl::string_view token, absl::string_view label,
                         std::initializer_list<absl::string_view> parts);

// Constant-time comparison. An empty proof (what ComputeProof returns when OpenSSL fails) equals
// nothing, so that a failure can never pass for a match.
bool ProofsEqual(absl::string_view a, absl::string_view b);

// Without a token anyone who reaches an address may join: refused unless `insecure` says that is
// meant. `who` names the service in the error ("hmc-coordinator", "rank transport").
absl::Status RequireToken(absl::string_view token, bool insecure, absl::string_view who);

}  // namespace hmc

#endif  // HMC_CORE_AUTH_H_
