#ifndef HMC_DDP_TENSOR_INTEROP_H_
#define HMC_DDP_TENSOR_INTEROP_H_

#include <ATen/core/Tensor.h>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/buffer.h"
#include "core/reduce_op.h"

namespace hmc::ddp {

// A view of a dense, contiguous CPU tensor as an hmc buffer; an error naming what is wrong
// otherwise (device, layout, dtype).
absl::StatusOr<Buffer> BufferOf(const at::Tensor& tensor);

absl::StatusOr<ReduceOp> ReduceOpOf(const c10d::ReduceOp& op);

// Throws the status as a c10::Error (what libtorch callers catch) unless it is OK.
void ThrowIfError(const absl::Status& status);

}  // namespace hmc::ddp

#endif  // HMC_DDP_TENSOR_INTEROP_H_
