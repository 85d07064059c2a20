// hmc-fault-rank: one rank of the fault harness. Joins the group (or the running group, from the
// round it is at), then averages up to round --rounds (Communicator::Average, or BeginAverage
// with --parts; each rank's vector and weight from averaging_rounds.h), retrying a round that
// ends with "membership changed", and prints each committed round on stdout.
//
// Exit codes: 0 every round committed; 3 an error that is not a membership change; 4 this rank
// was removed from the group (it was stopped or cut off for longer than the heartbeat timeout).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "collectives/averaging.h"
#include "collectives/communicator.h"
#include "collectives/group.h"
#include "collectives/link_probe.h"
#include "core/fnv.h"
#include "perf/fault/averaging_rounds.h"

ABSL_FLAG(int, rounds, 30, "Rounds to commit.");
ABSL_FLAG(int64_t, count, 1 << 18, "Floats per vector.");
ABSL_FLAG(absl::Duration, pause, absl::Milliseconds(20), "Pause between rounds (the step's work).");
ABSL_FLAG(int, parts, 1,
          "Parts each round's vector comes in, each added after --pause/parts as backward makes "
          "a step's buckets ready (Communicator::BeginAverage); 1: one Average call.");
ABSL_FLAG(int, overlap, 0,
          "Instead of the rounds: this many steps of --pause of work (a backward) and a round, "
          "alternated: Average once the work is done, and the round in --parts parts added "
          "during the work; rank 0 prints the median step time of each.");
ABSL_FLAG(int, max_retries, 50, "Membership changes one round may see before the rank gives up.");
ABSL_FLAG(int, die_id, -1, "The rank (stable id) that kills itself (SIGKILL) at --die_at.");
ABSL_FLAG(int, die_at, -1, "The round at which --die_id kills itself (a crash for hmcrun tests).");
ABSL_FLAG(int64_t, state, 0,
          "Floats of state every rank keeps in step (each round adds its average to it) and a "
          "joining rank downloads; 0: none.");
ABSL_FLAG(bool, reprobe, false,
          "At the end, print the links the group plans with (a joiner's inferred), then probe "
          "them again and print what the probe measured (perf/fault/joiner_links_wan.sh).");
ABSL_FLAG(int, compare, 0,
          "Instead of the rounds: this many all-reduces (sum) and Average rounds of the same "
          "vector, alternated; rank 0 prints the median time of each (what the commit costs).");

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Alternates plain all-reduces and Average rounds of `values` and prints their median times.
int CompareWithAllReduce(hmc::Communicator& comm, std::vector<float>& values, int calls) {
  std::vector<double> plain_ms, average_ms;
  const hmc::Buffer buffer{values.data(), values.size(), hmc::DType::kF32};
  hmc::CallOptions call;
  call.algo = "ring";  // One plan for both, chosen once (no trials between them).
  for (int i = 0; i < calls; ++i) {
    hmc::fault::FillRound(comm.id(), i, values);
    absl::Time start = absl::Now();
    if (absl::Status s = comm.AllReduce(buffer, buffer, hmc::ReduceOp::kSum, call)->Wait();
        !s.ok()) {
      std::fprintf(stderr, "allreduce: %s\n", s.ToString().c_str());
      return hmc::fault::kExitRoundFailed;
    }
    plain_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    hmc::fault::FillRound(comm.id(), i, values);
    start = absl::Now();
    if (auto r = comm.Average(buffer, hmc::fault::RoundWeight(comm.id(), i), call); !r.ok()) {
      std::fprintf(stderr, "average: %s\n", r.status().ToString().c_str());
      return hmc::fault::kExitRoundFailed;
    }
    average_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  if (comm.rank() == 0) {
    const double plain = Median(plain_ms), average = Median(average_ms);
    std::printf(
        "%d ranks, %zu floats, %d calls each: allreduce median %.2f ms, Average median "
        "%.2f ms, ratio %.3f, difference %.2f ms\n",
        comm.size(), values.size(), calls, plain, average, average / plain, average - plain);
  }
  return 0;
}

// One averaging round over `values`, in --parts parts of about equal size.
absl::StatusOr<hmc::AverageOutcome> AverageRound(hmc::Communicator& comm,
                                                 std::vector<float>& values, double weight,
                                                 const hmc::SharedState* state) {
  const size_t parts = static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_parts)));
  if (parts == 1) {
    return comm.Average(hmc::Buffer{values.data(), values.size(), hmc::DType::kF32}, weight, {},
                        state);
  }
  absl::StatusOr<std::unique_ptr<hmc::AverageRound>> round = comm.BeginAverage(weight, {}, state);
  if (!round.ok()) return round.status();
  const absl::Duration gap = absl::GetFlag(FLAGS_pause) / static_cast<double>(parts);
  for (size_t k = 0; k < parts; ++k) {
    absl::SleepFor(gap);  // The work that makes the part ready.
    const size_t begin = values.size() * k / parts, end = values.size() * (k + 1) / parts;
    const hmc::Buffer part{values.data() + begin, end - begin, hmc::DType::kF32};
    if (absl::Status s = (*round)->Add(part, k + 1 == parts); !s.ok()) return s;
  }
  return (*round)->Finish();
}

// Alternates steps of --pause of work followed by Average with steps whose round takes --parts
// parts during the work, and prints their median times.
int CompareOverlap(hmc::Communicator& comm, std::vector<float>& values, int steps) {
  std::vector<double> after_ms, during_ms;
  for (int i = 0; i < steps; ++i) {
    const double weight = hmc::fault::RoundWeight(comm.id(), i);
    hmc::fault::FillRound(comm.id(), i, values);
    absl::Time start = absl::Now();
    absl::SleepFor(absl::GetFlag(FLAGS_pause));
    absl::StatusOr<hmc::AverageOutcome> after =
        comm.Average(hmc::Buffer{values.data(), values.size(), hmc::DType::kF32}, weight);
    after_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    hmc::fault::FillRound(comm.id(), i, values);
    start = absl::Now();
    absl::StatusOr<hmc::AverageOutcome> during = AverageRound(comm, values, weight, nullptr);
    during_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!after.ok() || !during.ok()) {
      std::fprintf(stderr, "average: %s\n",
                   (after.ok() ? during.status() : after.status()).ToString().c_str());
      return hmc::fault::kExitRoundFailed;
    }
  }
  if (comm.rank() == 0) {
    const double after = Median(after_ms), during = Median(during_ms);
    std::printf(
        "%d ranks, %zu floats, work %s, %d parts, %d steps each: Average after the work median "
        "%.2f ms, in parts during it %.2f ms, ratio %.3f\n",
        comm.size(), values.size(), absl::FormatDuration(absl::GetFlag(FLAGS_pause)).c_str(),
        absl::GetFlag(FLAGS_parts), steps, after, during, during / after);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  absl::StatusOr<hmc::Options> options = hmc::Options::FromEnvironment();
  if (!options.ok()) {
    std::fprintf(stderr, "hmc-fault-rank: %s\n", options.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<hmc::Communicator>> comm = hmc::Communicator::Create(*options);
  if (!comm.ok()) {
    std::fprintf(stderr, "hmc-fault-rank: %s\n", comm.status().ToString().c_str());
    // A rank stopped while the group formed finds that it was removed (fault_trial.cc's code 4).
    return absl::StrContains(comm.status().message(), "removed from the group")
               ? hmc::fault::kExitRemoved
               : 1;
  }
  const int id = (*comm)->id();
  std::printf("joined id=%d\n", id);
  std::fflush(stdout);
  std::vector<float> values(static_cast<size_t>(absl::GetFlag(FLAGS_count)));
  if (absl::GetFlag(FLAGS_compare) > 0) {
    return CompareWithAllReduce(**comm, values, absl::GetFlag(FLAGS_compare));
  }
  if (absl::GetFlag(FLAGS_overlap) > 0) {
    return CompareOverlap(**comm, values, absl::GetFlag(FLAGS_overlap));
  }
  const int rounds = absl::GetFlag(FLAGS_rounds);
  std::vector<float> model(static_cast<size_t>(absl::GetFlag(FLAGS_state)));
  for (size_t i = 0; i < model.size(); ++i) {
    model[i] = hmc::fault::InitialState(id, i, (*comm)->joined_running_group());
  }
  int64_t step = 0;
  const hmc::SharedState state{
      {{"model", hmc::Buffer{model.data(), model.size(), hmc::DType::kF32}},
       {"step", hmc::Buffer{&step, 1, hmc::DType::kI64}}}};
  // A rank that joined a running group takes up the rounds where the group is.
  for (int round = static_cast<int>((*comm)->averaging_rounds()); round < rounds; ++round) {
    if (id == absl::GetFlag(FLAGS_die_id) && round == absl::GetFlag(FLAGS_die_at)) {
      raise(SIGKILL);
    }
    absl::StatusOr<hmc::AverageOutcome> outcome;
    for (int tries = 0; tries <= absl::GetFlag(FLAGS_max_retries); ++tries) {
      hmc::fault::FillRound(id, round, values);
      outcome = AverageRound(**comm, values, hmc::fault::RoundWeight(id, round),
                             model.empty() ? nullptr : &state);
      if (outcome.ok() || !hmc::IsMembershipChanged(outcome.status())) break;
      std::printf("retry round=%d: %s\n", round, std::string(outcome.status().message()).c_str());
    }
    if (!outcome.ok()) {
      std::printf("error round=%d: %s\n", round, outcome.status().ToString().c_str());
      std::fflush(stdout);
      return absl::StrContains(outcome.status().message(), "removed from the group") ||
                     absl::StrContains((*comm)->health().message(), "removed from the group")
                 ? hmc::fault::kExitRemoved
                 : hmc::fault::kExitRoundFailed;
    }
    if (outcome->round != static_cast<uint64_t>(round)) {
      std::printf("error round=%d: the communicator committed round %d\n", round,
                  static_cast<int>(outcome->round));
      return hmc::fault::kExitRoundFailed;
    }
    hmc::fault::CommittedRound line{outcome->round,
                                    outcome->epoch,
                                    outcome->attempts,
                                    outcome->contributors,
                                    outcome->weights,
                                    hmc::fault::HashFloats(values),
                                    absl::ToUnixMillis(absl::Now())};
    std::printf("%s\n", line.ToLine().c_str());
    if (!model.empty()) {
      if (step != round) {
        std::printf("error round=%d: the state's step is %d\n", round, static_cast<int>(step));
        return hmc::fault::kExitRoundFailed;
      }
      hmc::fault::AddRound(values, model);
      ++step;
      std::printf("%s\n", hmc::fault::StateLine(round, hmc::fault::HashFloats(model)).c_str());
    }
    std::fflush(stdout);
    absl::SleepFor(absl::GetFlag(FLAGS_pause));
  }
  // What the group plans with at the end, the same bits on every rank (fault_trial.cc compares).
  const hmc::LinkMatrix links = (*comm)->links();
  const uint64_t hash =
      hmc::Fnv1a(links.mbit.data(), links.mbit.size() * sizeof(double),
                 hmc::Fnv1a(links.rtt_ms.data(), links.rtt_ms.size() * sizeof(double)));
  std::printf("links ranks=%d measured=%d size=%d hash=%llu\n", (*comm)->size(),
              links.measured() ? 1 : 0, links.size, static_cast<unsigned long long>(hash));
  if (absl::GetFlag(FLAGS_reprobe)) {
    std::printf("planned with (ranks %s):\n%s", absl::StrJoin((*comm)->group()->ids, ",").c_str(),
                links.ToTable().c_str());
    if (absl::Status s = (*comm)->ProbeLinks(); !s.ok()) {
      std::printf("error: probing again: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("probed again:\n%s", (*comm)->links().ToTable().c_str());
  }
  std::printf("done\n");
  return 0;
}
