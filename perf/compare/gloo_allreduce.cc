// hmc-gloo-allreduce: Gloo's all-reduce algorithms measured the way hmc-perf measures hmc, for
// side-by-side runs (Debian's libgloo-dev).
//
//   build/bin/hmc-gloo-allreduce -n 4 -a ring_chunked -b 64M -e 64M
//
// -n starts N copies of itself that rendezvous (and part) through a FileStore in a fresh
// temporary folder, under hmcrun's group runner: when one rank fails, the others are stopped.
// Each algorithm gets a fresh context (reusing one across algorithms stalls), every iteration
// starts after a barrier and lasts until its slowest rank is done, time is the median, and #wrong
// compares with a serial reference.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "launcher/group_runner.h"
#include "launcher/process.h"
#include "perf/check_pattern.h"
#include "perf/perf_table.h"

namespace {

std::unique_ptr<gloo::Algorithm> MakeAlgorithm(const std::string& name,
                                               const std::shared_ptr<gloo::Context>& context,
                                               float* data, int count) {
  std::vector<float*> ptrs = {data};
  if (name == "ring") return std::make_unique<gloo::AllreduceRing<float>>(context, ptrs, count);
  if (name == "ring_chunked") {
    return std::make_unique<gloo::AllreduceRingChunked<float>>(context, ptrs, count);
  }
  if (name == "halving_doubling") {
    return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context, ptrs, count);
  }
  if (name == "bcube") return std::make_unique<gloo::AllreduceBcube<float>>(context, ptrs, count);
  return nullptr;
}

// Gloo's TCP pairs take a peer's close for an error: a rank still waiting inside a Gloo barrier
// throws "Connection closed by peer" when a faster rank has left it and exited, even if that
// rank's message had already arrived (CI saw it once, after bcube's last size). So the ranks
// part through the file store, which closes no socket: each marks itself done and waits for the
// others' marks before its context and sockets go.
void WaitUntilEveryRankIsDone(gloo::rendezvous::Store& store, std::chrono::milliseconds timeout,
                              int rank, int size) {
  store.set("done/" + std::to_string(rank), {'1'});
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("done/" + std::to_string(r));
  store.wait(keys, timeout);
}

int RunRank(int rank, int size, const std::string& store_path, const std::string& host,
            const std::vector<std::string>& algorithms, const hmc::perf::Sweep& sweep) {
  gloo::transport::tcp::attr attr(host.c_str());
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_path);
  std::vector<float> data(sweep.max_bytes / sizeof(float));
  int wrong_total = 0;
  for (const std::string& name : algorithms) {
    gloo::rendezvous::PrefixStore prefixed(name, store);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // One all-reduce over an emulated per-flow cap can take minutes.
    context->setTimeout(std::chrono::hours(1));
    context->connectFullMesh(prefixed, device);
    gloo::BarrierAllToAll barrier(context);
    if (rank == 0) {
      std::printf("# gloo %s: %d ranks, dtype float, op sum\n", name.c_str(), size);
      hmc::perf::PrintTableHeader(stdout);
    }
    for (uint64_t bytes = sweep.min_bytes; bytes <= sweep.max_bytes;
         bytes = hmc::perf::NextSize(bytes, sweep.factor)) {
      const int count = static_cast<int>(bytes / sizeof(float));
      auto algorithm = MakeAlgorithm(name, context, data.data(), count);
      if (algorithm == nullptr) {
        std::fprintf(stderr, "unknown gloo algorithm %s\n", name.c_str());
        return 2;
      }
      std::vector<double> times;
      double slowest = 0;  // Each run lasts until its slowest rank is done.
      gloo::AllreduceRing<double> max_over_ranks(context, {&slowest}, 1,
                                                 gloo::ReductionFunction<double>::max);
      for (int it = 0; it < sweep.warmup + sweep.iterations; ++it) {
        barrier.run();
        const absl::Time start = absl::Now();
        algorithm->run();
        slowest = absl::ToDoubleMicroseconds(absl::Now() - start);
        max_over_ranks.run();
        if (it >= sweep.warmup) times.push_back(slowest);
      }
      long long wrong = -1;
      if (sweep.check) {
        hmc::FillPattern(data.data(), count, hmc::DType::kF32, rank, hmc::ReduceOp::kSum);
        barrier.run();
        algorithm->run();
        wrong = static_cast<long long>(hmc::CountReductionMismatches(
            data.data(), count, hmc::DType::kF32, size, hmc::ReduceOp::kSum));
        wrong_total += static_cast<int>(wrong);
      }
      const double us = hmc::perf::Median(times);
      const double algbw = bytes / us / 1e3;
      if (rank == 0) {
        hmc::perf::PrintTableRow(stdout,
                                 {bytes, static_cast<uint64_t>(count), "float", "sum", us, algbw,
                                  algbw * hmc::perf::AllReduceBusFactor(size), wrong});
      }
    }
    WaitUntilEveryRankIsDone(prefixed, context->getTimeout(), rank, size);
  }
  return wrong_total == 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  int np = 0;
  hmc::perf::Sweep sweep;
  std::string algorithms = "ring_chunked";
  std::string host = "127.0.0.1";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    if (flag == "-n")
      ok = absl::SimpleAtoi(value, &np);
    else if (flag == "-a")
      algorithms = value;
    else if (flag == "--host")
      host = value;
    else
      ok = hmc::perf::ParseSweepFlag(flag, value, &sweep);
    if (!ok) {
      std::fprintf(stderr,
                   "usage: hmc-gloo-allreduce -n RANKS [-a ring,ring_chunked,halving_doubling,"
                   "bcube] [-b MIN] [-e MAX] [-f FACTOR] [-i ITERS] [-w WARMUP] [-k 0|1] [--host "
                   "ADDRESS]\n");
      return 2;
    }
  }
  const std::vector<std::string> names = absl::StrSplit(algorithms, ',');
  if (const char* rank_env = std::getenv("HMC_GLOO_RANK")) {
    return RunRank(std::atoi(rank_env), std::atoi(std::getenv("HMC_GLOO_SIZE")),
                   std::getenv("HMC_GLOO_STORE"), host, names, sweep);
  }
  if (np < 1) {
    std::fprintf(stderr, "hmc-gloo-allreduce: -n RANKS is required\n");
    return 2;
  }
  char pattern[] = "/tmp/hmc-gloo-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 1;
  const std::string store = pattern;
  std::vector<std::string> child_argv(argv, argv + argc);
  child_argv[0] = hmc::SelfExecutable(argv[0]);
  // The group runner stops the other ranks when one fails: the ranks' parting wait on the store
  // would not notice a peer that died.
  std::vector<hmc::RankProcess> ranks;
  for (int r = 0; r < np; ++r) {
    ranks.push_back(
        {.command = {.argv = child_argv,
                     .env = {"HMC_GLOO_RANK=" + std::to_string(r),
                             "HMC_GLOO_SIZE=" + std::to_string(np), "HMC_GLOO_STORE=" + store}},
         .name = "rank " + std::to_string(r)});
  }
  const absl::StatusOr<int> code = hmc::RunRanks(std::move(ranks), {.timeout = absl::Hours(1)});
  if (!code.ok()) {
    std::fprintf(stderr, "hmc-gloo-allreduce: %s\n", code.status().ToString().c_str());
  }
  const int status = code.ok() && *code == 0 ? 0 : 1;
  std::filesystem::remove_all(store);
  return status;
}
