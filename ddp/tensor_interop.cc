#include "ddp/tensor_interop.h"

#include <c10/util/Exception.h>

#include <string>

#include "absl/strings/str_format.h"

namespace hmc::ddp {

absl::StatusOr<Buffer> BufferOf(const at::Tensor& tensor) {
  if (!tensor.defined()) return absl::InvalidArgumentError("undefined tensor");
  if (!tensor.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor on %s: hmc's host path takes CPU tensors (the CUDA path comes later)",
        tensor.device().str()));
  }
  if (tensor.is_sparse() || !tensor.is_contiguous()) {
    return absl::InvalidArgumentError("tensor is not dense and contiguous");
  }
  DType dtype;
  switch (tensor.scalar_type()) {
    case at::kFloat:
      dtype = DType::kF32;
      break;
    case at::kHalf:
      dtype = DType::kF16;
      break;
    case at::kBFloat16:
      dtype = DType::kBF16;
      break;
    case at::kDouble:
      dtype = DType::kF64;
      break;
    case at::kInt:
      dtype = DType::kI32;
      break;
    case at::kLong:
      dtype = DType::kI64;
      break;
    case at::kByte:
      dtype = DType::kU8;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("tensor dtype %s is not one hmc reduces (f32, f16, bf16, f64, i32, i64, "
                          "u8)",
                          std::string(c10::toString(tensor.scalar_type()))));
  }
  return Buffer{tensor.data_ptr(), static_cast<size_t>(tensor.numel()), dtype};
}

absl::StatusOr<ReduceOp> ReduceOpOf(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::kSum;
    case c10d::ReduceOp::AVG:
      return ReduceOp::kAvg;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::kProd;
    case c10d::ReduceOp::MIN:
      return ReduceOp::kMin;
    case c10d::ReduceOp::MAX:
      return ReduceOp::kMax;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("reduce op %d is not supported by hmc (sum, avg, product, min, max)",
                          static_cast<int>(op.op_)));
  }
}

void ThrowIfError(const absl::Status& status) {
  TORCH_CHECK(status.ok(), "hmc: ", std::string(status.message()));
}

}  // namespace hmc::ddp
