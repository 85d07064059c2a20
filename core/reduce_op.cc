#include "core/reduce_op.h"

#include "absl/strings/str_format.h"

namespace hmc {

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProd:
      return "prod";
  }
  return "invalid";
}

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  for (ReduceOp op : kAllReduceOps) {
    if (ReduceOpName(op) == name) return op;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown reduction '%s' (expected sum, avg, min, max or prod)", name));
}

bool IsValidReduceOp(uint8_t raw) { return raw <= static_cast<uint8_t>(ReduceOp::kProd); }

}  // namespace hmc
