#include "perf/fault/averaging_rounds.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/fnv.h"

namespace hmc::fault {

float RoundValue(int id, uint64_t round, size_t i) {
  return 0.25f * static_cast<float>((id * 7 + round * 3 + i) % 64);
}

void FillRound(int id, uint64_t round, std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i) values[i] = RoundValue(id, round, i);
}

double RoundWeight(int id, uint64_t round) { return 1.0 + static_cast<double>((id + round) % 4); }

uint64_t HashFloats(const std::vector<float>& values) {
  return Fnv1a(values.data(), values.size() * sizeof(float));
}

std::string CommittedRound::ToLine() const {
  return absl::StrFormat(
      "committed round=%d epoch=%d attempts=%d contributors=%s weights=%s "
      "hash=%d unix_ms=%d",
      round, epoch, attempts, absl::StrJoin(contributors, ","), absl::StrJoin(weights, ","), hash,
      unix_ms);
}

absl::StatusOr<CommittedRound> CommittedRound::Parse(const std::string& line) {
  std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (fields.size() != 8 || fields[0] != "committed") {
    return absl::InvalidArgumentError(absl::StrFormat("not a committed round: '%s'", line));
  }
  CommittedRound r;
  bool ok = true;
  auto value = [&](const std::string& field, const std::string& name) -> std::string {
    if (field.rfind(name + "=", 0) != 0) ok = false;
    return field.substr(std::min(field.size(), name.size() + 1));
  };
  ok &= absl::SimpleAtoi(value(fields[1], "round"), &r.round);
  ok &= absl::SimpleAtoi(value(fields[2], "epoch"), &r.epoch);
  ok &= absl::SimpleAtoi(value(fields[3], "attempts"), &r.attempts);
  for (absl::string_view id : absl::StrSplit(value(fields[4], "contributors"), ',')) {
    ok &= absl::SimpleAtoi(id, &r.contributors.emplace_back());
  }
  for (absl::string_view w : absl::StrSplit(value(fields[5], "weights"), ',')) {
    ok &= absl::SimpleAtod(w, &r.weights.emplace_back());
  }
  ok &= absl::SimpleAtoi(value(fields[6], "hash"), &r.hash);
  ok &= absl::SimpleAtoi(value(fields[7], "unix_ms"), &r.unix_ms);
  if (!ok) return absl::InvalidArgumentError(absl::StrFormat("malformed round: '%s'", line));
  return r;
}

uint64_t ExpectedHash(uint64_t round, const std::vector<int>& contributors,
                      const std::vector<double>& weights, size_t count) {
  double total_weight = 0;
  for (double w : weights) total_weight += w;
  std::vector<float> average(count);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;  // Exact: a few multiples of 1/4 below 16, times weights up to 4.
    for (size_t k = 0; k < contributors.size() && k < weights.size(); ++k) {
      sum += weights[k] * RoundValue(contributors[k], round, i);
    }
    average[i] = static_cast<float>(sum) / static_cast<float>(total_weight);
  }
  return HashFloats(average);
}

float InitialState(int id, size_t i, bool joiner) {
  return joiner ? -1.0f - static_cast<float>(id) : 0.5f * static_cast<float>(i % 8);
}

void AddRound(const std::vector<float>& average, std::vector<float>& state) {
  for (size_t i = 0; i < state.size(); ++i) state[i] += average[i % average.size()];
}

std::string StateLine(uint64_t round, uint64_t hash) {
  return absl::StrFormat("state round=%d hash=%d", round, hash);
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> ParseStateLine(const std::string& line) {
  std::pair<uint64_t, uint64_t> parsed;
  if (std::sscanf(line.c_str(), "state round=%lu hash=%lu", &parsed.first, &parsed.second) != 2) {
    return absl::InvalidArgumentError(absl::StrFormat("not a state line: '%s'", line));
  }
  return parsed;
}

}  // namespace hmc::fault
