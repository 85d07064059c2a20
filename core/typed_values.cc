#include "core/typed_values.h"

#include <cstdint>

#include "core/half.h"

namespace hmc {

double LoadAsDouble(const void* data, size_t index, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(data)[index];
    case DType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(data)[index]);
    case DType::kBF16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(data)[index]);
    case DType::kF64:
      return static_cast<const double*>(data)[index];
    case DType::kI32:
      return static_cast<const int32_t*>(data)[index];
    case DType::kI64:
      return static_cast<double>(static_cast<const int64_t*>(data)[index]);
    case DType::kU8:
      return static_cast<const uint8_t*>(data)[index];
  }
  return 0;
}

void StoreFromDouble(void* data, size_t index, DType dtype, double value) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(data)[index] = static_cast<float>(value);
      return;
    case DType::kF16:
      static_cast<uint16_t*>(data)[index] = FloatToHalf(static_cast<float>(value));
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(data)[index] = FloatToBFloat16(static_cast<float>(value));
      return;
    case DType::kF64:
      static_cast<double*>(data)[index] = value;
      return;
    case DType::kI32:
      static_cast<int32_t*>(data)[index] = static_cast<int32_t>(value);
      return;
    case DType::kI64:
      static_cast<int64_t*>(data)[index] = static_cast<int64_t>(value);
      return;
    case DType::kU8:
      static_cast<uint8_t*>(data)[index] = static_cast<uint8_t>(value);
      return;
  }
}

}  // namespace hmc
