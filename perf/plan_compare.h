#ifndef HMC_PERF_PLAN_COMPARE_H_
#define HMC_PERF_PLAN_COMPARE_H_

// hmc-perf --plans: all-reduce plans side by side in one process group, alternated call by call,
// so that every plan meets the same links, connections and machine load.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/communicator.h"

namespace hmc::perf {

struct PlanSpec {
  std::string label;  // The spec's own text.
  CallOptions call;
};

// "algo=ring; algo=hierarchical codec_inter=int8; algo=auto shares=equal": plans separated by
// ';', each a space-separated list of KEY=VALUE with KEY one of algo, codec_inter, codec_intra,
// shares (what a call can force); an empty plan (or "auto") leaves everything to the tuner.
absl::StatusOr<std::vector<PlanSpec>> ParsePlans(absl::string_view text);

// An f32 sum of `bytes` of gradient-like values with every plan, `warmup` untimed rounds then
// `rounds` timed ones; each round runs every plan once, starting one plan later than the last
// round and in the opposite order. Each call starts after a barrier and lasts until its slowest
// rank is done. Rank 0 prints one row per plan: the rounds' times, their median and its ratio to
// the fastest plan's, the egress per GB averaged, the relative L2 error against the exact sum,
// whether every rank held the same bits, and the plan the call ran; then, for the last round,
// every rank's phases (each from the end of the last; the first from the call's start). Returns
// the process's exit
// status: 0, or 1 when a call failed or ranks disagreed.
int ComparePlans(Communicator& comm, const std::vector<PlanSpec>& plans, uint64_t bytes, int rounds,
                 int warmup);

}  // namespace hmc::perf

#endif  // HMC_PERF_PLAN_COMPARE_H_
