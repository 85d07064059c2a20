#ifndef HMC_CORE_DTYPE_H_
#define HMC_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hmc {

// Element types that collectives understand. The numeric values travel on the wire (argument
// checks), so never renumber them.
enum class DType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2, kF64 = 3, kI32 = 4, kI64 = 5, kU8 = 6 };

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                       DType::kI32, DType::kI64, DType::kU8};

size_t DTypeSize(DType dtype);
absl::string_view DTypeName(DType dtype);
absl::StatusOr<DType> ParseDType(absl::string_view name);
bool IsValidDType(uint8_t raw);

// The type reductions accumulate in: f32 for the 16-bit floats, the type itself otherwise.
DType AccumulatorType(DType dtype);

}  // namespace hmc

#endif  // HMC_CORE_DTYPE_H_
