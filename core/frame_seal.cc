#include "core/frame_seal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "core/log.h"

namespace hmc {

namespace {
constexpr size_t kMacBytes = 16;
constexpr size_t kCrcBytes = 4;
constexpr size_t kKeyBytes = 32;
constexpr size_t kIvBytes = 12;

// An OpenSSL failure here leaves no safe way on: a frame would go out unsealed or be accepted
// unchecked. It only happens when the library itself is broken.
void CheckCrypto(int ok, const char* what) {
  if (ok == 1) return;
  Logf("integrity", "OpenSSL failed in %s", what);
  std::abort();
}
}  // namespace

absl::StatusOr<FrameIntegrity> ParseFrameIntegrity(absl::string_view name) {
  if (name == "mac") return FrameIntegrity::kMac;
  if (name == "crc") return FrameIntegrity::kCrc;
  if (name == "off") return FrameIntegrity::kOff;
  return absl::InvalidArgumentError(
      absl::StrFormat("integrity must be mac, crc or off, not '%s'", name));
}

absl::string_view FrameIntegrityName(FrameIntegrity integrity) {
  switch (integrity) {
    case FrameIntegrity::kMac:
      return "mac";
    case FrameIntegrity::kCrc:
      return "crc";
    case FrameIntegrity::kOff:
      return "off";
  }
  return "?";
}

// GMAC is AES-GCM with everything as additional authenticated data: one pass of carry-less
// multiplication (PCLMULQDQ), several GB/s per core.
struct FrameSeal::Cipher {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  ~Cipher() { EVP_CIPHER_CTX_free(ctx); }
};

FrameSeal::FrameSeal(FrameIntegrity integrity, absl::string_view key) : integrity_(integrity) {
  if (integrity_ != FrameIntegrity::kMac) return;
  cipher_ = std::make_unique<Cipher>();
  uint8_t k[kKeyBytes] = {};
  std::memcpy(k, key.data(), std::min(key.size(), kKeyBytes));
  CheckCrypto(cipher_->ctx != nullptr ? 1 : 0, "EVP_CIPHER_CTX_new");
  CheckCrypto(EVP_EncryptInit_ex(cipher_->ctx, EVP_aes_256_gcm(), nullptr, k, nullptr),
              "EVP_EncryptInit_ex");
  OPENSSL_cleanse(k, sizeof(k));
}

FrameSeal::~FrameSeal() = default;

size_t FrameSeal::trailer_bytes() const {
  switch (integrity_) {
    case FrameIntegrity::kMac:
      return kMacBytes;
    case FrameIntegrity::kCrc:
      return kCrcBytes;
    case FrameIntegrity::kOff:
      return 0;
  }
  return 0;
}

void FrameSeal::Begin() {
  if (integrity_ == FrameIntegrity::kCrc) {
    crc_ = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
  } else if (integrity_ == FrameIntegrity::kMac) {
    // The sequence number is the nonce: unique per key, and it binds each frame to its place.
    uint8_t iv[kIvBytes] = {};
    for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(sequence_ >> (56 - 8 * i));
    CheckCrypto(EVP_EncryptInit_ex(cipher_->ctx, nullptr, nullptr, nullptr, iv),
                "EVP_EncryptInit_ex");
  }
  ++sequence_;
}

void FrameSeal::Update(std::span<const uint8_t> bytes) {
  const uint8_t* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {  // Both take an int-sized length.
    const size_t n = std::min<size_t>(left, 1u << 30);
    if (integrity_ == FrameIntegrity::kCrc) {
      crc_ = static_cast<uint32_t>(crc32(crc_, data, static_cast<uInt>(n)));
    } else if (integrity_ == FrameIntegrity::kMac) {
      int out = 0;
      CheckCrypto(EVP_EncryptUpdate(cipher_->ctx, nullptr, &out, data, static_cast<int>(n)),
                  "EVP_EncryptUpdate");
    }
    data += n;
    left -= n;
  }
}

void FrameSeal::Finish(std::span<uint8_t> trailer) {
  if (integrity_ == FrameIntegrity::kCrc) {
    for (size_t i = 0; i < kCrcBytes; ++i) trailer[i] = static_cast<uint8_t>(crc_ >> (8 * i));
  } else if (integrity_ == FrameIntegrity::kMac) {
    uint8_t unused[16];  // GCM's final step writes no ciphertext.
    int out = 0;
    CheckCrypto(EVP_EncryptFinal_ex(cipher_->ctx, unused, &out), "EVP_EncryptFinal_ex");
    CheckCrypto(EVP_CIPHER_CTX_ctrl(cipher_->ctx, EVP_CTRL_GCM_GET_TAG, kMacBytes, trailer.data()),
                "EVP_CTRL_GCM_GET_TAG");
  }
}

void FrameSeal::Append(std::vector<uint8_t>& frame) {
  Begin();
  Update(frame);
  const size_t length = frame.size();
  frame.resize(length + trailer_bytes());
  Finish(std::span<uint8_t>(frame.data() + length, trailer_bytes()));
}

bool FrameSeal::Verify(std::span<const uint8_t> trailer) {
  uint8_t expected[kMaxSealBytes];
  const size_t n = trailer_bytes();
  Finish(std::span<uint8_t>(expected, n));
  return trailer.size() == n && CRYPTO_memcmp(expected, trailer.data(), n) == 0;
}

}  // namespace hmc
