#include "core/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "core/log.h"

namespace hmc {

std::string RandomNonce() {
  std::string nonce(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) !=
      1) {
    // Without randomness there is no safe handshake; stop rather than run unauthenticated.
    std::fprintf(stderr, "hmc: OpenSSL RAND_bytes failed\n");
    std::abort();
  }
  return nonce;
}

std::string ComputeProof(absl::string_view token, absl::string_view label,
                         std::initializer_list<absl::string_view> parts) {
  std::string message(label.data(), label.size());
  for (absl::string_view part : parts) {
    const uint32_t size = static_cast<uint32_t>(part.size());
    message.append(reinterpret_cast<const char*>(&size), sizeof(size));
    message.append(part.data(), part.size());
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
           &digest_len) == nullptr) {
    Logf("auth", "HMAC-SHA256 failed in OpenSSL: this proof matches nothing");
    return "";
  }
  return std::string(reinterpret_cast<const char*>(digest), digest_len);
}

bool ProofsEqual(absl::string_view a, absl::string_view b) {
  return !a.empty() && a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::Status RequireToken(absl::string_view token, bool insecure, absl::string_view who) {
  if (!token.empty() || insecure) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: no shared token, so anyone who reaches this address could join: set HMC_TOKEN (hmcrun "
      "makes one), or allow unauthenticated peers explicitly with --insecure (HMC_INSECURE=1)",
      who));
}

}  // namespace hmc
