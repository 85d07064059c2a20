#ifndef HMC_TESTS_TESTING_CERTIFICATES_H_
#define HMC_TESTS_TESTING_CERTIFICATES_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_format.h"
#include "core/tls.h"

namespace hmc::testing_util {

// Certificates made with the openssl command: one authority the ranks trust, and another.
class Certificates {
 public:
  Certificates()
      : dir_(std::filesystem::temp_directory_path() / absl::StrFormat("hmc-certs-%d", getpid())) {
    std::filesystem::create_directories(dir_);
    MakeAuthority("ca");
    MakeAuthority("stranger-ca");
    Issue("rank0", "ca");
    Issue("rank1", "ca");
    Issue("stranger", "stranger-ca");
  }
  ~Certificates() { std::filesystem::remove_all(dir_); }

  TlsConfig For(const std::string& name) const {
    TlsConfig tls;
    tls.mode = TlsMode::kOn;
    tls.cert_file = Path(name + ".pem");
    tls.key_file = Path(name + ".key");
    tls.ca_file = Path("ca.pem");
    return tls;
  }

 private:
  std::string Path(const std::string& file) const { return (dir_ / file).string(); }
  void Run(const std::string& command) {
    ASSERT_EQ(std::system((command + " 2>/dev/null >/dev/null").c_str()), 0) << command;
  }
  void MakeAuthority(const std::string& name) {
    Run(absl::StrFormat(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        "-subj /CN=%s -keyout %s -out %s",
        name, Path(name + ".key"), Path(name + ".pem")));
  }
  void Issue(const std::string& name, const std::string& authority) {
    Run(absl::StrFormat(
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=%s "
        "-keyout %s -out %s",
        name, Path(name + ".key"), Path(name + ".csr")));
    Run(absl::StrFormat("openssl x509 -req -days 1 -in %s -CA %s -CAkey %s -CAcreateserial -out %s",
                        Path(name + ".csr"), Path(authority + ".pem"), Path(authority + ".key"),
                        Path(name + ".pem")));
  }

  std::filesystem::path dir_;
};

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_CERTIFICATES_H_
