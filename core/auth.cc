#include "core/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

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
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &digest_len);
  return std::string(reinterpret_cast<const char*>(digest), digest_len);
}

bool ProofsEqual(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace hmc
