#ifndef HMC_PERF_PERF_TABLE_H_
#define HMC_PERF_PERF_TABLE_H_

// The nccl-tests style table that hmc-perf and every baseline in perf/compare print, so that one
// parser (perf/compare/report.py) reads them all, and the size arguments they share.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace hmc::perf {

// "64", "64K", "64M", "1G" (binary multiples) to bytes; false on anything else.
bool ParseSize(const std::string& text, uint64_t* out);

// The size sweep and repetitions every baseline program takes: -b MIN -e MAX -f FACTOR -i ITERS
// -w WARMUP -k CHECK, as hmc-perf does.
struct Sweep {
  uint64_t min_bytes = 1 << 20;
  uint64_t max_bytes = 64 << 20;
  double factor = 2;
  int iterations = 10;
  int warmup = 3;
  bool check = true;  // A final run per size compared with the reference (#wrong; else -1).
};
// Applies one flag of the sweep; false if the flag is not one of them or its value is bad.
bool ParseSweepFlag(const std::string& flag, const std::string& value, Sweep* sweep);
// The next size of the sweep (at least one byte more).
uint64_t NextSize(uint64_t bytes, double factor);

// The two column-title lines, after a caller-written "# <system> <collective>: ..." line.
void PrintTableHeader(FILE* out);

struct TableRow {
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::string dtype;
  std::string redop;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  long long wrong = 0;  // -1: not checked.
};
void PrintTableRow(FILE* out, const TableRow& row);

// The median of timings (of an even count, the mean of the middle two); 0 for none.
double Median(std::vector<double> values);

// All-reduce bus bandwidth factor, 2(n-1)/n, as nccl-tests defines it.
inline double AllReduceBusFactor(int ranks) { return 2.0 * (ranks - 1) / ranks; }

}  // namespace hmc::perf

#endif  // HMC_PERF_PERF_TABLE_H_
