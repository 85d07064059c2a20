// Debian's libtorch-dev 1.13 does not ship this header, yet c10d/reducer.hpp includes it for two
// names: DistAutogradContext::GradCallback (checked equal to Reducer::GradCallback by a
// static_assert) and ContextPtr (held by Reducer::RpcContext, whose layout therefore must match:
// a std::shared_ptr<DistAutogradContext>). These are their declarations as in PyTorch 1.13's
// torch/csrc/distributed/autograd/context/context.h; hmc never creates a distributed autograd
// context, so the class stays incomplete beyond them. Only ddp/ adds this directory to its
// include path, after libtorch's own.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch
