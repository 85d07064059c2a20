#ifndef HMC_EXAMPLES_TRAIN_CV_FASHION_MNIST_H_
#define HMC_EXAMPLES_TRAIN_CV_FASHION_MNIST_H_

#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/statusor.h"

namespace hmc::examples {

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

struct ImageSet {
  at::Tensor images;  // [N, 1, 28, 28] uint8 pixels: a quarter of the memory of floats.
  at::Tensor labels;  // [N] int64, 0..9.
};

// Reads the gzip-compressed IDX files that Debian's dataset-fashion-mnist installs
// (train-images-idx3-ubyte.gz, ...). A missing, truncated or malformed file is an error naming
// the file and what was wrong.
absl::StatusOr<ImageSet> LoadFashionMnist(const std::string& dir, bool train);

// What the model takes: `pixels` (uint8, any shape) as floats of mean 0 and deviation 1 over the
// data set. Applied per batch, so that a run converts only the images it uses.
at::Tensor Normalize(const at::Tensor& pixels);

}  // namespace hmc::examples

#endif  // HMC_EXAMPLES_TRAIN_CV_FASHION_MNIST_H_
