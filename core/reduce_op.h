#ifndef HMC_CORE_REDUCE_OP_H_
#define HMC_CORE_REDUCE_OP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hmc {

// Element-wise reductions. kAvg sums then divides by the number of contributors once, at the
// element's owner (integer types divide with truncation toward zero). Values travel on the wire.
enum class ReduceOp : uint8_t { kSum = 0, kAvg = 1, kMin = 2, kMax = 3, kProd = 4 };

inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin,
                                             ReduceOp::kMax, ReduceOp::kProd};

absl::string_view ReduceOpName(ReduceOp op);
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);
bool IsValidReduceOp(uint8_t raw);

}  // namespace hmc

#endif  // HMC_CORE_REDUCE_OP_H_
