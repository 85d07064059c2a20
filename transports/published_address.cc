#include "transports/published_address.h"

#include <unistd.h>

#include <fstream>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/fnv.h"

namespace hmc {

std::string HostAndNamespace() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  char ns[128] = {};
  const ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  const std::string key = absl::StrCat(boot_id, "/", n > 0 ? std::string(ns, n) : "");
  return absl::StrFormat("%016x", Fnv1a(key.data(), key.size()));
}

std::string PublishedAddress(const std::string& kind, const std::string& bytes) {
  return absl::StrCat(kind, ":", HostAndNamespace(), ":", absl::BytesToHexString(bytes));
}

std::optional<ParsedAddress> ParsePublishedAddress(const std::string& kind,
                                                   const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  const bool hex = parts.size() == 3 && !parts[2].empty() && parts[2].size() % 2 == 0 &&
                   absl::c_all_of(parts[2], [](char c) { return absl::ascii_isxdigit(c); });
  if (!hex || parts[0] != kind) return std::nullopt;
  return ParsedAddress{parts[1], absl::HexStringToBytes(parts[2])};
}

}  // namespace hmc
