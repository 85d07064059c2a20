#include "perf/codec_bench.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "absl/time/clock.h"
#include "collectives/codecs/codec.h"
#include "perf/perf_table.h"

namespace hmc::perf {

int RunCodecBench(uint64_t bytes, int iterations) {
  const size_t count = bytes / sizeof(float);
  std::vector<float> in(count), out(count);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : in) x = normal(rng);
  std::printf("# hmc-perf codec-bench: %zu f32 values (%.0f MiB), one core, median of %d\n", count,
              bytes / 1048576.0, iterations);
  std::printf("| codec | ratio | encode (GB/s) | decode (GB/s) | relative L2 error |\n");
  std::printf("|---|---|---|---|---|\n");
  for (const std::string& spec : DefaultCodecSpecs()) {
    auto codec = MakeCodec(spec);
    if (!codec.ok()) return 1;
    std::vector<uint8_t> wire((*codec)->MaxEncodedBytes(count));
    size_t encoded = 0;
    std::vector<double> encode_s, decode_s;
    for (int it = 0; it < iterations; ++it) {
      absl::Time start = absl::Now();
      encoded = (*codec)->Encode(in.data(), count, wire.data());
      encode_s.push_back(absl::ToDoubleSeconds(absl::Now() - start));
      start = absl::Now();
      if (!(*codec)->Decode(wire.data(), encoded, out.data(), count).ok()) return 1;
      decode_s.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    }
    double diff = 0, norm = 0;
    for (size_t i = 0; i < count; ++i) {
      diff += (double(in[i]) - out[i]) * (double(in[i]) - out[i]);
      norm += double(in[i]) * in[i];
    }
    std::printf("| %s | %.4f | %.2f | %.2f | %.2e |\n", spec.c_str(),
                static_cast<double>(encoded) / bytes, bytes / Median(encode_s) / 1e9,
                bytes / Median(decode_s) / 1e9, std::sqrt(diff / norm));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace hmc::perf
