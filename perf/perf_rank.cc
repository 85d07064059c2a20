#include "perf/perf_rank.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace hmc::perf {

float GaussianValue(int rank, size_t index) {
  uint64_t z = (uint64_t{static_cast<uint32_t>(rank)} << 40) ^ index;
  auto next = [&z] {  // splitmix64
    z += 0x9e3779b97f4a7c15ull;
    uint64_t x = z;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return ((x ^ (x >> 31)) >> 11) * 0x1.0p-53;
  };
  const double u = std::max(next(), 1e-300), v = next();
  return static_cast<float>(std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v) * (1 + rank));
}

double GaussianError(ReduceOp op, int ranks, const float* out, size_t count, size_t stride) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < count; i += std::max<size_t>(1, stride)) {
    double want = 0;
    for (int r = 0; r < ranks; ++r) want += GaussianValue(r, i);
    if (op == ReduceOp::kAvg) want /= ranks;
    err += (out[i] - want) * (out[i] - want);
    norm += want * want;
  }
  return norm > 0 ? std::sqrt(err / norm) : 0;
}

bool ReduceInPlace(Communicator& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  const Buffer b{data, count, dtype};
  CallOptions call;
  call.algo = "halving_doubling";
  if (absl::Status s = comm.AllReduce(b, b, op, call)->Wait(); !s.ok()) {
    std::fprintf(stderr, "hmc-perf: rank %d: %s\n", comm.rank(), s.ToString().c_str());
    return false;
  }
  return true;
}

}  // namespace hmc::perf
