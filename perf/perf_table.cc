#include "perf/perf_table.h"

#include <algorithm>

#include "absl/strings/numbers.h"

namespace hmc::perf {

bool ParseSize(const std::string& text, uint64_t* out) {
  uint64_t multiplier = 1;
  std::string digits = text;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K':
      case 'k':
        multiplier = 1ull << 10;
        break;
      case 'M':
      case 'm':
        multiplier = 1ull << 20;
        break;
      case 'G':
      case 'g':
        multiplier = 1ull << 30;
        break;
      default:
        break;
    }
    if (multiplier != 1) digits.pop_back();
  }
  uint64_t value;
  if (!absl::SimpleAtoi(digits, &value)) return false;
  *out = value * multiplier;
  return true;
}

bool ParseSweepFlag(const std::string& flag, const std::string& value, Sweep* sweep) {
  if (flag == "-b") return ParseSize(value, &sweep->min_bytes) && sweep->min_bytes >= 4;
  if (flag == "-e") return ParseSize(value, &sweep->max_bytes);
  if (flag == "-f") return absl::SimpleAtod(value, &sweep->factor) && sweep->factor > 1;
  if (flag == "-i") return absl::SimpleAtoi(value, &sweep->iterations) && sweep->iterations > 0;
  if (flag == "-w") return absl::SimpleAtoi(value, &sweep->warmup) && sweep->warmup >= 0;
  if (flag == "-k") return absl::SimpleAtob(value, &sweep->check);
  return false;
}

uint64_t NextSize(uint64_t bytes, double factor) {
  return std::max<uint64_t>(bytes + 1, static_cast<uint64_t>(bytes * factor));
}

void PrintTableHeader(FILE* out) {
  std::fprintf(out, "#%12s %12s %8s %6s %12s %10s %10s %8s\n", "size", "count", "type", "redop",
               "time(us)", "algbw", "busbw", "#wrong");
  std::fprintf(out, "#%12s %12s %8s %6s %12s %10s %10s %8s\n", "(B)", "(elements)", "", "", "",
               "(GB/s)", "(GB/s)", "");
  std::fflush(out);
}

void PrintTableRow(FILE* out, const TableRow& row) {
  std::fprintf(out, " %12llu %12llu %8s %6s %12.1f %10.3f %10.3f %8lld\n",
               static_cast<unsigned long long>(row.bytes),
               static_cast<unsigned long long>(row.count), row.dtype.c_str(), row.redop.c_str(),
               row.time_us, row.algbw_gbps, row.busbw_gbps, row.wrong);
  std::fflush(out);
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t half = values.size() / 2;
  return values.size() % 2 == 1 ? values[half] : (values[half - 1] + values[half]) / 2;
}

}  // namespace hmc::perf
