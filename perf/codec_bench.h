#ifndef HMC_PERF_CODEC_BENCH_H_
#define HMC_PERF_CODEC_BENCH_H_

#include <cstdint>

namespace hmc::perf {

// hmc-perf --codec-bench: every codec on `bytes` of Gaussian f32 values on one core: encoded size
// over input size, encode and decode GB/s of input (median of `iterations`), and the relative L2
// error of one round trip. Prints a markdown table; returns the exit code.
int RunCodecBench(uint64_t bytes, int iterations);

}  // namespace hmc::perf

#endif  // HMC_PERF_CODEC_BENCH_H_
