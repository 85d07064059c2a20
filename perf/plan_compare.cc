#include "perf/plan_compare.h"

#include <algorithm>
#include <cstdio>
#include <span>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/frame.h"
#include "perf/perf_rank.h"
#include "perf/perf_table.h"

namespace hmc::perf {
namespace {

// The error is measured on a sample: the exact sum of n ranks' deviates costs n of them per value.
constexpr size_t kErrorSampleValues = size_t{1} << 20;
// Phases a plan's report may show (hierarchical has three).
constexpr size_t kMaxPhases = 8;
// Per rank, the phases' seconds and then its measured sending rate (CollectiveReport).
constexpr size_t kRankRow = kMaxPhases + 1;

struct PlanOutcome {
  std::vector<double> seconds;  // Timed rounds, in round order.
  CollectiveReport report;      // Of the last call.
  double egress_usd = 0;        // Of the last call, all ranks.
  double l2_error = 0;
  bool same_bits = true;
  std::string phases;  // Of the last call, each phase's longest time over the ranks.
  std::vector<std::string> rank_phases;  // Of the last call, every rank's phases, on rank 0.
};

// "in zone 8.02, across zones 6.10 (ends 14.12 s)": a rank's phases and when its call ended.
// `row`: a rank's kRankRow entries.
std::string PhaseLine(const std::vector<std::pair<std::string, absl::Duration>>& names,
                      const double* row, size_t phases) {
  std::string line;
  double total = 0;
  for (size_t j = 0; j < phases; ++j) {
    absl::StrAppendFormat(&line, "%s%s %.2f", j == 0 ? "" : ", ", names[j].first, row[j]);
    total += row[j];
  }
  absl::StrAppendFormat(&line, " (ends %.2f s)", total);
  if (row[kMaxPhases] > 0) {
    absl::StrAppendFormat(&line, "; sending rate measured %.1f Mbit/s", row[kMaxPhases]);
  }
  return line;
}

}  // namespace

absl::StatusOr<std::vector<PlanSpec>> ParsePlans(absl::string_view text) {
  std::vector<PlanSpec> plans;
  for (absl::string_view item : absl::StrSplit(text, ';')) {
    PlanSpec plan;
    plan.label = std::string(absl::StripAsciiWhitespace(item));
    for (absl::string_view field : absl::StrSplit(plan.label, ' ', absl::SkipEmpty())) {
      if (field == "auto") continue;
      const std::vector<std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
      std::string* target = nullptr;
      if (kv.size() == 2 && kv[0] == "algo") target = &plan.call.algo;
      if (kv.size() == 2 && kv[0] == "codec_inter") target = &plan.call.codec_inter;
      if (kv.size() == 2 && kv[0] == "codec_intra") target = &plan.call.codec_intra;
      if (kv.size() == 2 && kv[0] == "shares") target = &plan.call.shares;
      if (target == nullptr || kv[1].empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--plans: '%s' in plan '%s' is not KEY=VALUE with KEY algo, codec_inter, "
            "codec_intra or shares",
            field, plan.label));
      }
      *target = kv[1];
    }
    if (plan.label.empty()) plan.label = "auto";
    plans.push_back(std::move(plan));
  }
  return plans;
}

int ComparePlans(Communicator& comm, const std::vector<PlanSpec>& plans, uint64_t bytes, int rounds,
                 int warmup) {
  const int n = comm.size();
  const size_t count = bytes / sizeof(float);
  std::vector<float> in(count), out(count);
  for (size_t i = 0; i < count; ++i) in[i] = GaussianValue(comm.rank(), i);
  const Buffer in_buffer{in.data(), count, DType::kF32};
  const Buffer out_buffer{out.data(), count, DType::kF32};
  const int p = static_cast<int>(plans.size());
  std::vector<PlanOutcome> outcomes(p);
  for (int round = 0; round < warmup + rounds; ++round) {
    for (int i = 0; i < p; ++i) {
      // Each round starts one plan later and runs the other way round from the last, so that no
      // plan always follows the same one (a plan right after its twin finds its links warm).
      const int k = (round % 2 == 0 ? i + round : p - 1 - i + round) % p;
      if (absl::Status s = comm.Barrier()->Wait(); !s.ok()) {
        std::fprintf(stderr, "hmc-perf: rank %d: %s\n", comm.rank(), s.ToString().c_str());
        return 1;
      }
      const absl::Time start = absl::Now();
      std::shared_ptr<Work> work =
          comm.AllReduce(in_buffer, out_buffer, ReduceOp::kSum, plans[k].call);
      if (absl::Status s = work->Wait(); !s.ok()) {
        std::fprintf(stderr, "hmc-perf: rank %d, plan '%s': %s\n", comm.rank(),
                     plans[k].label.c_str(), s.ToString().c_str());
        return 1;
      }
      double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      if (!ReduceInPlace(comm, &seconds, 1, DType::kF64, ReduceOp::kMax)) return 1;
      PlanOutcome& o = outcomes[k];
      if (round >= warmup) o.seconds.push_back(seconds);
      if (round + 1 < warmup + rounds) continue;
      // The last round's result: every rank's bits and the error against the exact sum.
      o.report = work->report();
      const int64_t sum =
          Checksum(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(out.data()), bytes));
      int64_t sums[2] = {sum, -sum};  // Their maximum and minus their minimum.
      o.egress_usd = o.report.egress_usd;
      if (!ReduceInPlace(comm, sums, 2, DType::kI64, ReduceOp::kMax) ||
          !ReduceInPlace(comm, &o.egress_usd, 1, DType::kF64, ReduceOp::kSum)) {
        return 1;
      }
      o.same_bits = sums[0] == -sums[1];
      // Every rank's phases and rate (row r: rank r's, summed into place), named as rank 0 names
      // them (a fixed count, so that every rank takes part in the reduction whatever phases it
      // ran).
      std::vector<double> rank_rows(n * kRankRow, 0.0);
      const size_t phases = std::min(kMaxPhases, o.report.phases.size());
      for (size_t j = 0; j < phases; ++j) {
        rank_rows[comm.rank() * kRankRow + j] = absl::ToDoubleSeconds(o.report.phases[j].second);
      }
      rank_rows[comm.rank() * kRankRow + kMaxPhases] = o.report.send_bytes_per_s * 8 / 1e6;
      if (!ReduceInPlace(comm, rank_rows.data(), rank_rows.size(), DType::kF64, ReduceOp::kSum)) {
        return 1;
      }
      for (size_t j = 0; j < phases; ++j) {
        double slowest = 0;
        for (int r = 0; r < n; ++r) slowest = std::max(slowest, rank_rows[r * kRankRow + j]);
        absl::StrAppendFormat(&o.phases, "%s%s %.2f s",
                              j == 0 ? "; slowest rank per phase: " : ", ",
                              o.report.phases[j].first, slowest);
      }
      for (int r = 0; r < n && phases > 0; ++r) {
        o.rank_phases.push_back(PhaseLine(o.report.phases, &rank_rows[r * kRankRow], phases));
      }
      if (comm.rank() == 0) {
        o.l2_error = GaussianError(ReduceOp::kSum, n, out.data(), count,
                                   std::max<size_t>(1, count / kErrorSampleValues));
      }
    }
  }
  if (comm.rank() != 0) return 0;
  std::vector<double> medians;
  for (const PlanOutcome& o : outcomes) medians.push_back(Median(o.seconds));
  const double fastest = *std::min_element(medians.begin(), medians.end());
  std::printf(
      "# hmc-perf plans: %d ranks, all-reduce of %llu B f32 sum, %d timed rounds after %d "
      "warm-up, plans alternated (each round starts one plan later, in the other direction); a "
      "call's time is its slowest rank's\n",
      n, static_cast<unsigned long long>(bytes), rounds, warmup);
  std::printf(
      "| plan | rounds (s) | median (s) | × fastest | egress $/GB | rel. L2 error | "
      "same bits | ran as |\n|---|---|---|---|---|---|---|---|\n");
  bool agreed = true;
  for (int k = 0; k < p; ++k) {
    const PlanOutcome& o = outcomes[k];
    agreed &= o.same_bits;
    std::printf("| %s | %s | %.3f | %.2f | %.4f | %.1e | %s | %s (%s%s) |\n",
                plans[k].label.c_str(),
                absl::StrJoin(o.seconds, ", ",
                              [](std::string* s, double t) { absl::StrAppendFormat(s, "%.3f", t); })
                    .c_str(),
                medians[k], medians[k] / fastest, o.egress_usd / (bytes / 1e9), o.l2_error,
                o.same_bits ? "yes" : "NO", o.report.algorithm.c_str(), o.report.plan.c_str(),
                o.phases.c_str());
  }
  // Where the slowest rank's time went: each phase waits for the ranks it needs, so a phase that
  // ends late on one rank lengthens the next phase of others.
  for (int k = 0; k < p; ++k) {
    for (size_t r = 0; r < outcomes[k].rank_phases.size(); ++r) {
      std::printf("# %s, last round, rank %zu: %s\n", plans[k].label.c_str(), r,
                  outcomes[k].rank_phases[r].c_str());
    }
  }
  return agreed ? 0 : 1;
}

}  // namespace hmc::perf
