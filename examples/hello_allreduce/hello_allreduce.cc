// hello_allreduce: the smallest hmc program. Every rank contributes (rank+1)·i at index i; after
// an all-reduce every rank holds size(size+1)/2·i, which each checks.
//
//   build/bin/hello_allreduce --np=4                 # four local ranks and a coordinator
//   HMC_COORDINATOR=host:port HMC_TOKEN=... hello_allreduce   # one rank of a group started
//   elsewhere
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "collectives/communicator.h"
#include "launcher/local_group.h"
#include "launcher/process.h"

namespace {

int RunRank(const hmc::Options& options, size_t count, int iterations) {
  absl::StatusOr<std::unique_ptr<hmc::Communicator>> comm = hmc::Communicator::Create(options);
  if (!comm.ok()) {
    std::fprintf(stderr, "hello_allreduce: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  const int rank = (*comm)->rank();
  const int size = (*comm)->size();
  std::vector<float> data(count);
  const double expected_factor = size * (size + 1) / 2.0;
  double best_ms = 1e30;
  for (int it = 0; it < iterations; ++it) {
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((rank + 1) * (i % 1024));
    hmc::Buffer buffer{data.data(), count, hmc::DType::kF32};
    const absl::Time start = absl::Now();
    absl::Status s = (*comm)->AllReduce(buffer, buffer, hmc::ReduceOp::kSum)->Wait();
    best_ms = std::min(best_ms, absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: allreduce failed: %s\n", rank, s.ToString().c_str());
      return 1;
    }
    for (size_t i = 0; i < count; ++i) {
      if (data[i] != static_cast<float>(expected_factor * (i % 1024))) {
        std::fprintf(stderr, "rank %d: wrong value %g at %zu, expected %g\n", rank, data[i], i,
                     expected_factor * (i % 1024));
        return 1;
      }
    }
  }
  std::printf("rank %d/%d (zone %s): allreduce of %zu floats correct, best of %d: %.2f ms\n", rank,
              size, options.zone.c_str(), count, iterations, best_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<hmc::Options> options = hmc::Options::FromEnvironment();
  if (!options.ok()) {
    std::fprintf(stderr, "hello_allreduce: %s\n", options.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::vector<std::string>> rest =
      options->ApplyFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!rest.ok()) {
    std::fprintf(stderr, "hello_allreduce: %s\n", rest.status().ToString().c_str());
    return 2;
  }
  int np = 0;
  size_t count = 1 << 20;
  for (const std::string& arg : *rest) {
    if (absl::StartsWith(arg, "--np=") && absl::SimpleAtoi(arg.substr(5), &np) && np > 0) continue;
    if (absl::StartsWith(arg, "--count=") && absl::SimpleAtoi(arg.substr(8), &count)) continue;
    std::fprintf(stderr,
                 "usage: hello_allreduce [--np=N] [--count=ELEMENTS] [--OPTION=VALUE ...]\n"
                 "unknown argument: %s\n",
                 arg.c_str());
    return 2;
  }
  if (np > 0 && options->coordinator.empty()) {
    // Launcher mode: this program again, as np ranks in two zones, with a local coordinator.
    hmc::LocalGroupSpec spec;
    spec.argv = {hmc::SelfExecutable(argv[0]), "--count=" + std::to_string(count)};
    spec.ranks = np;
    spec.options = *options;
    spec.zones = {"zone-a", "zone-b"};
    absl::StatusOr<int> code = hmc::RunLocalGroup(spec);
    if (!code.ok()) {
      std::fprintf(stderr, "hello_allreduce: %s\n", code.status().ToString().c_str());
      return 1;
    }
    if (*code == 0) std::printf("hello_allreduce: all %d ranks agree\n", np);
    return *code;
  }
  return RunRank(*options, count, 5);
}
