#ifndef HMC_CORE_BUFFER_H_
#define HMC_CORE_BUFFER_H_

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace hmc {

// Where a buffer's memory lives. Host memory only for now; CUDA devices come with the cuda/ layer,
// which is reached through interfaces declared in core.
struct Device {
  enum class Kind : uint8_t { kHost = 0, kCuda = 1 };
  Kind kind = Kind::kHost;
  int index = 0;
  bool is_host() const { return kind == Kind::kHost; }
};

// A typed view of memory a collective reads or writes. It does not own the memory.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;  // Elements, not bytes.
  DType dtype = DType::kF32;
  Device device;

  size_t bytes() const { return count * DTypeSize(dtype); }
  uint8_t* byte_data() const { return static_cast<uint8_t*>(data); }
};

}  // namespace hmc

#endif  // HMC_CORE_BUFFER_H_
