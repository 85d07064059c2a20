#ifndef HMC_CORE_WIRE_H_
#define HMC_CORE_WIRE_H_

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace hmc {

// Serialises control payloads: fixed-width little-endian integers and length-prefixed strings.
class WireWriter {
 public:
  template <typename T>
  void Put(T value) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void PutString(absl::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads what WireWriter wrote. Every read checks the remaining length; after the first failure
// ok() is false and every later read returns a zero value, so a parser checks once at the end.
class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  template <typename T>
  T Get() {
    T value{};
    if (!ok_ || bytes_.size() - offset_ < sizeof(T)) {
      ok_ = false;
      return value;
    }
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  std::string GetString() {
    const uint32_t size = Get<uint32_t>();
    if (!ok_ || bytes_.size() - offset_ < size) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + offset_), size);
    offset_ += size;
    return s;
  }
  // True when every read succeeded and nothing is left over.
  bool done() const { return ok_ && offset_ == bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
  bool ok_ = true;
};

}  // namespace hmc

#endif  // HMC_CORE_WIRE_H_
