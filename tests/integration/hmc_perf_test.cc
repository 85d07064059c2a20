// hmc-perf as users run it: its plan comparison on four local ranks, progress on long runs, the
// tables' median, and the JSON records' per-call times.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "perf/perf_table.h"
#include "tests/testing/command.h"

namespace hmc {
namespace {

using testing_util::RunCommand;

// The cells of the table row whose first cell is `plan`; empty if there is none.
std::vector<std::string> RowOf(const std::string& output, const std::string& plan) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    std::vector<std::string> cells = absl::StrSplit(line, " | ");
    if (cells.size() == 8 && cells[0] == "| " + plan) return cells;
  }
  return {};
}

TEST(HmcPerfPlans, EveryPlanRunsAlternatedAndIsCheckedAgainstTheExactSum) {
  const testing_util::Outcome run =
      RunCommand({HMC_PERF_PATH, "-n", "4", "-e", "1M", "-i", "3", "-w", "1", "--plans",
                  "algo=ring; algo=butterfly shares=1,0,1,2 codec_intra=int8; auto; "
                  "algo=hierarchical"});
  ASSERT_EQ(run.code, 0) << run.output;
  for (const std::string plan : {"algo=ring", "auto", "algo=hierarchical"}) {
    std::vector<std::string> row = RowOf(run.output, plan);
    ASSERT_EQ(row.size(), 8u) << plan << "\n" << run.output;
    EXPECT_EQ(std::count(row[1].begin(), row[1].end(), ','), 2) << "three timed rounds";
    double error = 1;
    ASSERT_TRUE(absl::SimpleAtod(row[5], &error)) << row[5];
    EXPECT_LT(error, 1e-6) << plan;  // f32 sums of 4 values: rounding only.
    EXPECT_EQ(row[6], "yes");
  }
  std::vector<std::string> lossy =
      RowOf(run.output, "algo=butterfly shares=1,0,1,2 codec_intra=int8");
  ASSERT_EQ(lossy.size(), 8u) << run.output;
  double error = 0;
  ASSERT_TRUE(absl::SimpleAtod(lossy[5], &error)) << lossy[5];
  EXPECT_GT(error, 1e-4);  // int8 quantizes...
  EXPECT_LT(error, 5e-2);  // ...within its bound.
  EXPECT_EQ(lossy[6], "yes") << "every rank holds the owners' decoded bytes";
  EXPECT_TRUE(absl::StrContains(lossy[7], "butterfly (forced; codecs inter=none intra=int8"))
      << lossy[7];
  // Every rank's phases of the last round, for the plan that has phases.
  for (int rank = 0; rank < 4; ++rank) {
    const std::string line =
        absl::StrFormat("# algo=hierarchical, last round, rank %d: in zone ", rank);
    EXPECT_TRUE(absl::StrContains(run.output, line)) << line << "\n" << run.output;
  }
  EXPECT_FALSE(absl::StrContains(run.output, "# algo=ring, last round"))
      << "the ring has no phases";
}

TEST(HmcPerfPlans, AnUnknownKeyIsRefusedBeforeAnyRankStarts) {
  const testing_util::Outcome run =
      RunCommand({HMC_PERF_PATH, "-n", "2", "--plans", "algo=ring; colour=blue"});
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "'colour=blue' in plan 'colour=blue'")) << run.output;
}

// A run longer than -P seconds shows progress on stderr where someone watches (HMC_TERMINAL=1,
// as hmcrun sets it on a terminal), and the table stays intact.
TEST(HmcPerf, LongRunsShowProgressWhereSomeoneWatches) {
  const testing_util::Outcome run =
      RunCommand({"env", "HMC_TERMINAL=1", HMC_PERF_PATH, "-n", "2", "-b", "16M", "-e", "16M", "-i",
                  "20", "-w", "1", "-P", "0", "--algo=ring", "--local_sockets=0"});
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, testing::ContainsRegex("# allreduce of 16777216 bytes: call [0-9]+/21 "
                                                 "\\(1 warm-up\\), last [0-9.]+ s, [0-9]+ s left"));
  EXPECT_THAT(run.output, testing::ContainsRegex(" 16777216 +4194304 +float +sum "));
  // Into a file, nobody watches.
  const testing_util::Outcome logged =
      RunCommand({HMC_PERF_PATH, "-n", "2", "-b", "1M", "-e", "1M", "-i", "3", "-P", "0"});
  ASSERT_EQ(logged.code, 0) << logged.output;
  EXPECT_FALSE(absl::StrContains(logged.output, "call ")) << logged.output;
}

// -J appends a record per row with every call's time, warm-up first: how a path warms up (on a WAN
// the first seconds differ from the rest) is read from them. The row's time is the median of the
// timed ones.
TEST(HmcPerf, JsonRecordsHoldEveryCallWithTheWarmUpFirst) {
  const std::string path = testing_util::TempPath("calls.jsonl");
  std::remove(path.c_str());
  const testing_util::Outcome run = RunCommand(
      {HMC_PERF_PATH, "-n", "2", "-b", "64K", "-e", "128K", "-i", "3", "-w", "2", "-J", path});
  ASSERT_EQ(run.code, 0) << run.output;
  const std::vector<std::string> lines = testing_util::Lines(path);
  ASSERT_EQ(lines.size(), 2u) << "one record per size";
  for (const std::string& line : lines) {
    EXPECT_EQ(testing_util::JsonNumber(line, "warmup"), 2) << line;
    const std::string calls_key = "\"call_us\":[";
    const size_t at = line.find(calls_key);
    ASSERT_NE(at, std::string::npos) << line;
    const size_t from = at + calls_key.size();
    std::vector<double> each;
    for (absl::string_view cell :
         absl::StrSplit(absl::string_view(line).substr(from, line.find(']', from) - from), ',')) {
      double us = 0;
      ASSERT_TRUE(absl::SimpleAtod(cell, &us)) << line;
      EXPECT_GT(us, 0);
      each.push_back(us);
    }
    ASSERT_EQ(each.size(), 5u) << "2 warm-up calls and 3 timed: " << line;
    EXPECT_NEAR(perf::Median({each[2], each[3], each[4]}),
                testing_util::JsonNumber(line, "time_us"), 0.11)
        << line;
  }
  std::remove(path.c_str());
}

TEST(PerfTable, MedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  EXPECT_EQ(perf::Median({}), 0);
  EXPECT_EQ(perf::Median({3, 1, 2}), 2);
  EXPECT_EQ(perf::Median({4, 1, 3, 2}), 2.5);
}

}  // namespace
}  // namespace hmc
