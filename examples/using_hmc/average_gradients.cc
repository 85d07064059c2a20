// The smallest program built outside hmc's tree (README, "Using hmc from your project"): every
// rank holds a gradient of (rank+1)·i at index i, averages it with its peers, and checks that it
// now holds (size+1)/2·i. Started by hmcrun (which sets HMC_COORDINATOR, HMC_RANK, HMC_TOKEN).
#include <cstdio>
#include <vector>

#include "collectives/communicator.h"

int main() {
  absl::StatusOr<hmc::Options> options = hmc::Options::FromEnvironment();
  if (!options.ok()) {
    std::fprintf(stderr, "average_gradients: %s\n", options.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<hmc::Communicator>> comm = hmc::Communicator::Create(*options);
  if (!comm.ok()) {
    std::fprintf(stderr, "average_gradients: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  const int rank = (*comm)->rank();
  const int size = (*comm)->size();
  std::vector<float> gradient(1 << 20);
  for (size_t i = 0; i < gradient.size(); ++i)
    gradient[i] = static_cast<float>((rank + 1) * (i % 64));
  const hmc::Buffer buffer{gradient.data(), gradient.size(), hmc::DType::kF32};
  if (absl::Status s = (*comm)->AllReduce(buffer, buffer, hmc::ReduceOp::kAvg)->Wait(); !s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
    return 1;
  }
  for (size_t i = 0; i < gradient.size(); ++i) {
    const float expected = static_cast<float>((size + 1) / 2.0 * (i % 64));
    if (gradient[i] != expected) {
      std::fprintf(stderr, "rank %d: %g at %zu, expected %g\n", rank, gradient[i], i, expected);
      return 1;
    }
  }
  std::printf("rank %d of %d: averaged %zu floats, correct\n", rank, size, gradient.size());
  return 0;
}
