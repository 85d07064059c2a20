// train_cv: a small ResNet on Fashion-MNIST, alone or as one rank of a group started by hmcrun.
//   build/bin/train_cv                                             # one process
//   build/bin/hmcrun -hosts examples/inventory.local build/bin/train_cv   # four ranks, two zones
// Every epoch prints (rank 0) and appends to --json: samples/s, training loss, test accuracy,
// bytes sent inside and across zones and their egress cost. --checkpoint saves after every
// epoch and resumes from it. --sync=ddp averages every step (a global batch of --batch samples
// split over the ranks: the same run as one process with that batch); --sync=collab trains
// with the collaborative optimizer (steps when the group has seen --target_batch samples).
#include <torch/nn.h>
#include <torch/optim.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "examples/common/training_flags.h"
#include "examples/common/training_run.h"
#include "examples/train_cv/fashion_mnist.h"

ABSL_FLAG(int, batch, 128, "Global batch (ddp): split evenly over the ranks.");
ABSL_FLAG(std::string, optimizer, "adam", "adam or sgd (momentum 0.9).");
ABSL_FLAG(double, lr, 0.002, "Learning rate.");
ABSL_FLAG(int, max_train_samples, 0, "Use only this many training images per epoch (0: all).");
ABSL_FLAG(int, max_test_samples, 0, "Evaluate on this many test images (0: all 10000).");
ABSL_FLAG(std::string, data_dir, hmc::examples::kFashionMnistDir, "Fashion-MNIST's IDX files.");

namespace hmc::examples {
namespace {

// conv-norm-relu-conv-norm plus a shortcut (1x1 convolution when the shape changes).
struct ResidualBlockImpl : torch::nn::Module {
  ResidualBlockImpl(int in, int out, int stride)
      : conv1(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)),
        norm1(torch::nn::GroupNormOptions(4, out)),
        conv2(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)),
        norm2(torch::nn::GroupNormOptions(4, out)) {
    register_module("conv1", conv1);
    register_module("norm1", norm1);
    register_module("conv2", conv2);
    register_module("norm2", norm2);
    if (stride != 1 || in != out) {
      shortcut = register_module(
          "shortcut", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride)));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = torch::relu(norm1(conv1(x)));
    y = norm2(conv2(y));
    return torch::relu(y + (shortcut ? shortcut(x) : x));
  }
  torch::nn::Conv2d conv1;
  torch::nn::GroupNorm norm1;
  torch::nn::Conv2d conv2;
  torch::nn::GroupNorm norm2;
  torch::nn::Conv2d shortcut = nullptr;
};
TORCH_MODULE(ResidualBlock);

// Group normalisation instead of batch normalisation: no running statistics that would differ
// between ranks, and a rank's batch size does not change the function.
struct ResNetImpl : torch::nn::Module {
  ResNetImpl()
      : stem(torch::nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)),
        norm(torch::nn::GroupNormOptions(4, 16)),
        block1(16, 32, 2),
        block2(32, 64, 2),
        head(64 * 7 * 7, 10) {
    register_module("stem", stem);
    register_module("norm", norm);
    register_module("block1", block1);
    register_module("block2", block2);
    register_module("head", head);
  }
  // 28x28 -> 14x14 -> 7x7; the head sees the 7x7 map (pooling it away slows learning here).
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = torch::relu(norm(stem(x)));
    return head(block2(block1(y)).flatten(1));
  }
  torch::nn::Conv2d stem;
  torch::nn::GroupNorm norm;
  ResidualBlock block1, block2;
  torch::nn::Linear head;
};
TORCH_MODULE(ResNet);

// Accuracy and mean loss on this rank's part of the test set, summed over the group.
std::pair<double, double> Evaluate(ResNet& model, const ImageSet& test, TrainingRun& run) {
  torch::NoGradGuard no_grad;
  model->eval();
  double correct = 0, loss = 0, count = 0;
  const int64_t n = test.images.size(0);
  const auto [shard, shards] = run.evaluation_share();
  for (int64_t begin = shard * 500; begin < n; begin += shards * 500) {
    const int64_t len = std::min<int64_t>(500, n - begin);
    torch::Tensor logits = model->forward(Normalize(test.images.narrow(0, begin, len)));
    torch::Tensor labels = test.labels.narrow(0, begin, len);
    correct += logits.argmax(1).eq(labels).sum().item<double>();
    loss +=
        torch::nn::functional::cross_entropy(
            logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    count += len;
  }
  model->train();
  const std::vector<double> sums = run.SumOverRanks({correct, loss, count});
  return {sums[0] / sums[2], sums[1] / sums[2]};
}

int Main() {
  // The data first: a rank that joins a running group holds the members up from its join to its
  // first step, so it joins (TrainingRun::Start) only once it is ready to train.
  ImageSet train = ValueOrThrow(LoadFashionMnist(absl::GetFlag(FLAGS_data_dir), true));
  ImageSet test = ValueOrThrow(LoadFashionMnist(absl::GetFlag(FLAGS_data_dir), false));
  if (const int limit = absl::GetFlag(FLAGS_max_test_samples); limit > 0) {
    test.images = test.images.narrow(0, 0, std::min<int64_t>(limit, test.images.size(0)));
    test.labels = test.labels.narrow(0, 0, test.images.size(0));
  }
  std::unique_ptr<TrainingRun> run = StartFromFlags("train_cv", absl::GetFlag(FLAGS_batch));
  const int batch = absl::GetFlag(FLAGS_batch);
  const int64_t local_batch = run->LocalBatch(batch);
  int64_t epoch_samples = train.images.size(0);
  if (const int limit = absl::GetFlag(FLAGS_max_train_samples); limit > 0) {
    epoch_samples = std::min<int64_t>(epoch_samples, limit);
  }

  torch::manual_seed(absl::GetFlag(FLAGS_seed));
  ResNet model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (absl::GetFlag(FLAGS_optimizer) == "sgd") {
    optimizer = std::make_unique<torch::optim::SGD>(
        model->parameters(), torch::optim::SGDOptions(absl::GetFlag(FLAGS_lr)).momentum(0.9));
  } else if (absl::GetFlag(FLAGS_optimizer) == "adam") {
    optimizer = std::make_unique<torch::optim::Adam>(
        model->parameters(), torch::optim::AdamOptions(absl::GetFlag(FLAGS_lr)));
  } else {
    throw std::runtime_error("--optimizer=" + absl::GetFlag(FLAGS_optimizer) + ": adam or sgd");
  }
  run->Attach(*model, *optimizer);
  if (run->rank() == 0) {
    std::printf(
        "train_cv: %d rank(s), sync %s, global batch %d, %lld training images per "
        "epoch, %d torch thread(s) per rank\n",
        run->world(), run->sync().c_str(), batch, static_cast<long long>(epoch_samples),
        torch::get_num_threads());
  }
  // Every epoch, the same permutation on every rank; local batch `slot` is its slot-th slice.
  int order_epoch = -1;
  torch::Tensor order;
  const int64_t slots = epoch_samples / local_batch;
  run->Train(
      absl::GetFlag(FLAGS_epochs), epoch_samples, local_batch,
      [&](int epoch, int64_t slot) {
        if (epoch != order_epoch) {
          torch::manual_seed(absl::GetFlag(FLAGS_seed) * 1000 + epoch);
          order = torch::randperm(train.images.size(0), torch::kLong);
          order_epoch = epoch;
        }
        const torch::Tensor index = order.narrow(0, (slot % slots) * local_batch, local_batch);
        torch::Tensor loss = torch::nn::functional::cross_entropy(
            model->forward(Normalize(train.images.index_select(0, index))),
            train.labels.index_select(0, index));
        loss.backward();
        return loss.item<double>();
      },
      [&]() -> TrainingRun::Metrics {
        const auto [accuracy, test_loss] = Evaluate(model, test, *run);
        return {{"test_loss", test_loss}, {"test_accuracy", accuracy}};
      });
  return 0;
}

}  // namespace
}  // namespace hmc::examples

int main(int argc, char** argv) {
  return hmc::examples::RunExample(argc, argv, "train_cv",
                                   "Trains a small ResNet on Fashion-MNIST, alone or under hmcrun.",
                                   hmc::examples::Main);
}
