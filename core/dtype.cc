#include "core/dtype.h"

#include "absl/strings/str_format.h"

namespace hmc {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kU8:
      return 1;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float";
    case DType::kF16:
      return "half";
    case DType::kBF16:
      return "bfloat16";
    case DType::kF64:
      return "double";
    case DType::kI32:
      return "int32";
    case DType::kI64:
      return "int64";
    case DType::kU8:
      return "uint8";
  }
  return "invalid";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  struct Alias {
    absl::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float", DType::kF32},  {"f32", DType::kF32},       {"half", DType::kF16},
      {"f16", DType::kF16},    {"bfloat16", DType::kBF16}, {"bf16", DType::kBF16},
      {"double", DType::kF64}, {"f64", DType::kF64},       {"int32", DType::kI32},
      {"i32", DType::kI32},    {"int64", DType::kI64},     {"i64", DType::kI64},
      {"uint8", DType::kU8},   {"u8", DType::kU8}};
  for (const Alias& alias : kAliases) {
    if (alias.name == name) return alias.dtype;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown dtype '%s' (expected one of float, half, bfloat16, double, int32, int64, uint8)",
      name));
}

bool IsValidDType(uint8_t raw) { return raw <= static_cast<uint8_t>(DType::kU8); }

DType AccumulatorType(DType dtype) {
  return dtype == DType::kF16 || dtype == DType::kBF16 ? DType::kF32 : dtype;
}

}  // namespace hmc
