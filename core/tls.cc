#include "core/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"

namespace hmc {

namespace {

// What TLS 1.3 external PSKs are offered as; the key itself is per stream.
constexpr unsigned char kPskIdentity[] = "hmc-stream";
// TLS_AES_128_GCM_SHA256: the suite every TLS 1.3 stack and the kernel's TLS support.
constexpr unsigned char kPskSuite[] = {0x13, 0x01};
// Userspace TLS takes this much per SSL_write: many full 16 KiB records per call.
constexpr size_t kStagingBytes = 256 << 10;

std::string OpenSslError(absl::string_view what) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return std::string(what);
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return absl::StrFormat("%s: %s", what, text);
}

// The pre-shared key as a resumable TLS 1.3 session, as OpenSSL's PSK callbacks want it.
SSL_SESSION* PskSession(SSL* ssl, const std::string& psk) {
  const SSL_CIPHER* suite = SSL_CIPHER_find(ssl, kPskSuite);
  if (suite == nullptr) return nullptr;
  SSL_SESSION* session = SSL_SESSION_new();
  if (session == nullptr ||
      SSL_SESSION_set1_master_key(session, reinterpret_cast<const unsigned char*>(psk.data()),
                                  psk.size()) != 1 ||
      SSL_SESSION_set_cipher(session, suite) != 1 ||
      SSL_SESSION_set_protocol_version(session, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(session);
    return nullptr;
  }
  return session;
}

const std::string& PskOf(SSL* ssl) {
  return *static_cast<const std::string*>(SSL_get_app_data(ssl));
}

int UsePsk(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* id_length,
           SSL_SESSION** session) {
  *session = nullptr;
  SSL_SESSION* s = PskSession(ssl, PskOf(ssl));
  if (s == nullptr) return 0;
  if (md != nullptr && md != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s))) {
    SSL_SESSION_free(s);  // A second call after a HelloRetryRequest for another hash: no PSK.
    return 1;
  }
  *id = kPskIdentity;
  *id_length = sizeof(kPskIdentity) - 1;
  *session = s;
  return 1;
}

int FindPsk(SSL* ssl, const unsigned char* id, size_t id_length, SSL_SESSION** session) {
  *session = nullptr;
  if (id_length != sizeof(kPskIdentity) - 1 || std::memcmp(id, kPskIdentity, id_length) != 0) {
    return 1;  // Not ours: the handshake fails for want of a key.
  }
  *session = PskSession(ssl, PskOf(ssl));
  return *session != nullptr ? 1 : 0;
}

class TlsIo final : public StreamIo {
 public:
  TlsIo(SSL* ssl, int fd, std::string psk)
      : StreamIo(fd), ssl_(ssl), psk_(std::move(psk)), socket_(fd) {
    SSL_set_app_data(ssl_, &psk_);
  }
  ~TlsIo() override { SSL_free(ssl_); }

  absl::StatusOr<uint32_t> Handshake() override {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    if (r == 1) {
      if (!psk_.empty() && SSL_session_reused(ssl_) != 1) {
        // Without certificates nothing verifies a peer that chose a certificate over the key.
        return absl::PermissionDeniedError(
            "TLS handshake failed: the peer did not use the key derived from the token (it "
            "presented a certificate instead; give this side tls_cert, tls_key and tls_ca too)");
      }
      kernel_send_ = BIO_get_ktls_send(SSL_get_wbio(ssl_)) > 0;
      kernel_receive_ = BIO_get_ktls_recv(SSL_get_rbio(ssl_)) > 0;
      return 0u;
    }
    switch (SSL_get_error(ssl_, r)) {
      case SSL_ERROR_WANT_READ:
        return uint32_t{EPOLLIN};
      case SSL_ERROR_WANT_WRITE:
        return uint32_t{EPOLLOUT};
      default: {
        std::string why = OpenSslError("TLS handshake failed");
        if (const long verify = SSL_get_verify_result(ssl_); verify != X509_V_OK) {
          why += absl::StrFormat(" (certificate: %s)", X509_verify_cert_error_string(verify));
        }
        return absl::PermissionDeniedError(why);
      }
    }
  }

  IoResult Write(std::span<const iovec> iov) override {
    if (kernel_send_) return socket_.Write(iov);  // The kernel seals: no copy, no staging.
    if (!staged_.empty()) {
      IoResult flushed = Flush();
      if (flushed.kind != IoResult::kDone) return flushed;
    }
    for (const iovec& v : iov) {
      const size_t take = std::min(v.iov_len, kStagingBytes - staged_.size());
      const auto* p = static_cast<const uint8_t*>(v.iov_base);
      staged_.insert(staged_.end(), p, p + take);
      if (staged_.size() == kStagingBytes) break;
    }
    const size_t taken = staged_.size();
    IoResult r = Flush();
    if (r.kind == IoResult::kWouldBlock) r.kind = IoResult::kDone;  // Taken, sent later.
    r.bytes = taken;
    return r;
  }

  IoResult Flush() override {
    if (staged_.empty()) return IoResult{};
    ERR_clear_error();
    size_t written = 0;
    // On WANT_WRITE OpenSSL keeps what it sealed so far; the same call later goes on from there.
    const int r = SSL_write_ex(ssl_, staged_.data(), staged_.size(), &written);
    if (r == 1) {
      staged_.clear();
      return IoResult{};
    }
    return Failure(r, "TLS send failed");
  }

  IoResult Read(void* data, size_t bytes) override {
    ERR_clear_error();
    size_t n = 0;
    const int r = SSL_read_ex(ssl_, data, std::min<size_t>(bytes, INT_MAX), &n);
    if (r == 1) return IoResult{IoResult::kDone, n, {}};
    return Failure(r, "TLS receive failed");
  }

  bool pending_output() const override { return !staged_.empty(); }
  bool buffered() const override { return SSL_has_pending(ssl_) == 1; }

  std::string protection() const override {
    return absl::StrFormat("TLS 1.3 %s, kernel TLS: send %s, receive %s",
                           SSL_CIPHER_get_name(SSL_get_current_cipher(ssl_)),
                           kernel_send_ ? "yes" : "no", kernel_receive_ ? "yes" : "no");
  }

 private:
  IoResult Failure(int r, absl::string_view what) {
    const int saved_errno = errno;
    switch (SSL_get_error(ssl_, r)) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE:
        return IoResult{IoResult::kWouldBlock, 0, {}};
      case SSL_ERROR_ZERO_RETURN:
        return IoResult{IoResult::kClosed, 0, {}};
      case SSL_ERROR_SYSCALL:
        if (saved_errno == 0) return IoResult{IoResult::kClosed, 0, {}};
        ERR_clear_error();
        return IoResult{IoResult::kFailed, 0, std::strerror(saved_errno)};
      default:
        return IoResult{IoResult::kFailed, 0, OpenSslError(what)};
    }
  }

  SSL* const ssl_;
  const std::string psk_;  // SSL_get_app_data points here.
  SocketIo socket_;        // Writes once the kernel seals (kernel TLS).
  bool kernel_send_ = false;
  bool kernel_receive_ = false;
  std::vector<uint8_t> staged_;  // Taken by Write, not yet sealed and sent.
};

}  // namespace

absl::StatusOr<TlsConfig> TlsConfigFrom(const CoreOptions& options) {
  absl::StatusOr<TlsMode> mode = ParseTlsMode(options.tls);
  if (!mode.ok()) return mode.status();
  return TlsConfig{.mode = *mode,
                   .cert_file = options.tls_cert,
                   .key_file = options.tls_key,
                   .ca_file = options.tls_ca,
                   .kernel = options.tls_kernel};
}

absl::StatusOr<std::unique_ptr<TlsContext>> TlsContext::Create(const TlsConfig& config) {
  const int given = !config.cert_file.empty() + !config.key_file.empty() + !config.ca_file.empty();
  if (given != 0 && given != 3) {
    return absl::InvalidArgumentError(
        "tls_cert, tls_key and tls_ca go together: give all three or none");
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr) return absl::InternalError(OpenSslError("SSL_CTX_new"));
  auto fail = [ctx](absl::string_view what) {
    const std::string why = OpenSslError(what);
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError(why);
  };
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) return fail("TLS 1.3");
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
  if (config.kernel) SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
  // Nothing but application data after the handshake: kernel TLS cannot pass tickets on.
  SSL_CTX_set_num_tickets(ctx, 0);
  // Read whole socket buffers at once, not each record's header and body apart: a third of the
  // system calls. What was read ahead counts as buffered() (SSL_has_pending).
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, kStagingBytes);
  if (given == 3) {
    if (SSL_CTX_use_certificate_chain_file(ctx, config.cert_file.c_str()) != 1) {
      return fail(absl::StrFormat("tls_cert %s", config.cert_file));
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, config.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      return fail(absl::StrFormat("tls_key %s", config.key_file));
    }
    if (SSL_CTX_load_verify_locations(ctx, config.ca_file.c_str(), nullptr) != 1) {
      return fail(absl::StrFormat("tls_ca %s", config.ca_file));
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  } else {
    // Suites of the key's hash only: a server that picked another would find the key unusable.
    if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256") != 1) {
      return fail("TLS 1.3 suites");
    }
    SSL_CTX_set_psk_use_session_callback(ctx, UsePsk);
    SSL_CTX_set_psk_find_session_callback(ctx, FindPsk);
  }
  return std::unique_ptr<TlsContext>(new TlsContext(ctx, given == 3));
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

absl::StatusOr<std::unique_ptr<StreamIo>> TlsContext::Wrap(int fd, bool server,
                                                           std::string psk) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    return absl::InternalError(OpenSslError("SSL_new"));
  }
  if (server) {
    SSL_set_accept_state(ssl);
  } else {
    SSL_set_connect_state(ssl);
  }
  return std::unique_ptr<StreamIo>(new TlsIo(ssl, fd, certificates_ ? std::string() : psk));
}

}  // namespace hmc
