// What the ranks of hmc-test-ddp share: the synthetic task, its model and checks.
#ifndef HMC_TESTS_DDP_DDP_RANK_UTIL_H_
#define HMC_TESTS_DDP_DDP_RANK_UTIL_H_

#include <torch/nn.h>
#include <torch/optim.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.h"
#include "core/fnv.h"

namespace hmc::ddp {

inline constexpr int kExitWrong = 3;
inline constexpr int kFeatures = 16;
inline constexpr int kClasses = 4;
inline constexpr int kBatch = 8;
inline constexpr int kSteps = 15;

#define EXPECT_OR_FAIL(cond, ...)                   \
  do {                                              \
    if (!(cond)) {                                  \
      std::fprintf(stderr, "FAILED: " __VA_ARGS__); \
      std::fprintf(stderr, "\n");                   \
      return kExitWrong;                            \
    }                                               \
  } while (0)

struct Data {
  torch::Tensor x, y;
};

// A fixed synthetic classification task: labels from a random linear teacher.
inline Data MakeData(int rows) {
  torch::manual_seed(7);
  Data d;
  d.x = torch::randn({rows, kFeatures});
  d.y = d.x.matmul(torch::randn({kFeatures, kClasses})).argmax(1);
  return d;
}

inline torch::nn::Sequential MakeModel(int hidden = 32) {
  torch::manual_seed(1);
  return torch::nn::Sequential(torch::nn::Linear(kFeatures, hidden), torch::nn::Tanh(),
                               torch::nn::Linear(hidden, kClasses));
}

inline torch::Tensor Loss(torch::nn::Sequential& model, const torch::Tensor& x,
                          const torch::Tensor& y) {
  return torch::nn::functional::cross_entropy(model->forward(x), y);
}

inline double MaxDifference(const std::vector<torch::Tensor>& a,
                            const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  }
  return worst;
}

// The loss over the whole data set, without gradients.
inline double FullLoss(torch::nn::Sequential& model, const Data& d) {
  torch::NoGradGuard no_grad;
  return Loss(model, d.x, d.y).item<double>();
}

// FNV-1a over the bytes of every tensor.
inline uint64_t HashTensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  uint64_t h = kFnv1aOffset;
  for (const auto& [name, t] : tensors) {
    const at::Tensor c = t.contiguous();
    h = Fnv1a(c.data_ptr(), c.nbytes(), h);
  }
  return h;
}

// The rejoin modes' model: a replacement's starts one off everywhere, so that only the group's
// state, downloaded, can make it equal to the others'.
inline torch::nn::Sequential MakeRejoinModel(bool joiner) {
  auto model = MakeModel();
  if (joiner) {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.add_(1.0);
  }
  return model;
}

// The modes of diloco_rank.cc.
int RunDiLoCo(std::shared_ptr<Communicator> comm);
int RunDiLoCoStreaming(std::shared_ptr<Communicator> comm);
int RunDiLoCoSurvive(std::shared_ptr<Communicator> comm);
int RunDiLoCoRejoin(std::shared_ptr<Communicator> comm);
int RunDiLoCoRestore(std::shared_ptr<Communicator> comm);

}  // namespace hmc::ddp

#endif  // HMC_TESTS_DDP_DDP_RANK_UTIL_H_
