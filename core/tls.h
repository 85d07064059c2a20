#ifndef HMC_CORE_TLS_H_
#define HMC_CORE_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/options.h"
#include "core/stream_io.h"
#include "core/tls_mode.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX.

namespace hmc {

struct TlsConfig {
  TlsMode mode = TlsMode::kAuto;
  // All three, or none: without them each stream's key is a TLS 1.3 external pre-shared key
  // derived from the token and the stream's handshake (StreamSecrets::tls_psk); with them peers
  // present certificates and verify each other's chain against `ca_file`.
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  bool kernel = true;  // Ask for kernel TLS (kTLS).
};

// A rank's TLS settings from its options (tls, tls_cert, tls_key, tls_ca).
absl::StatusOr<TlsConfig> TlsConfigFrom(const CoreOptions& options);

// One SSL_CTX for every stream of a transport. Kernel TLS (kTLS) is asked for unless the config
// says not to: where the kernel and OpenSSL take the keys, records are sealed and opened by the
// kernel.
class TlsContext {
 public:
  static absl::StatusOr<std::unique_ptr<TlsContext>> Create(const TlsConfig& config);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // A TLS session over the connected non-blocking socket `fd`: server on the acceptor's side.
  // Its handshake runs through StreamIo::Handshake.
  absl::StatusOr<std::unique_ptr<StreamIo>> Wrap(int fd, bool server, std::string psk) const;

 private:
  TlsContext(ssl_ctx_st* ctx, bool certificates) : ctx_(ctx), certificates_(certificates) {}
  ssl_ctx_st* const ctx_;
  const bool certificates_;
};

}  // namespace hmc

#endif  // HMC_CORE_TLS_H_
