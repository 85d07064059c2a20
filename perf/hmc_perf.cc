// hmc-perf: collective bandwidth in the format of nccl-tests.
//
//   build/bin/hmc-perf -n 4 -b 1K -e 256M -f 2 -c allreduce
//
// With -n it hosts a coordinator and starts N copies of itself on this machine; started with
// HMC_COORDINATOR set (by hmcrun or by -n) it is one rank. Rank 0 prints, per size: time (median
// of the iterations, each started after a barrier and lasting until its slowest rank is done —
// every perf program here measures so), algbw = size/time, busbw = algbw·factor
// (allreduce 2(n-1)/n, reduce_scatter and allgather (n-1)/n, broadcast 1) and #wrong, the number
// of elements that differ from a serially computed reference after a final checked run.
// With --plans it runs one all-reduce size (-e) with several plans alternated (plan_compare.h).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "collectives/communicator.h"
#include "collectives/link_probe.h"
#include "collectives/shares.h"
#include "collectives/stream_probe.h"
#include "collectives/tuner.h"
#include "core/frame.h"
#include "launcher/local_group.h"
#include "launcher/process.h"
#include "launcher/progress_line.h"
#include "perf/check_pattern.h"
#include "perf/codec_bench.h"
#include "perf/perf_rank.h"
#include "perf/perf_table.h"
#include "perf/plan_compare.h"

namespace hmc {
namespace {

struct PerfArgs {
  int np = 0;
  uint64_t min_bytes = 1 << 10;
  uint64_t max_bytes = 64 << 20;
  double factor = 2;
  std::vector<std::string> collectives = {"allreduce"};
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  int iterations = 20;
  int warmup = 3;
  bool check = true;
  int root = 0;
  // -J: also append one JSON object per row to this file, with every call's time (warm-up
  // included: how long a path takes to warm up shows there).
  std::string json_path;
  // -P: a size whose calls last longer than this shows progress on stderr, where a person
  // watches (a terminal, or hmcrun's).
  double progress_after_s = 3;
  bool probe = false;        // --probe: the RTT and bandwidth matrix instead of collectives.
  bool codec_bench = false;  // --codec-bench: codec speed and error on this core, no group.
  std::vector<perf::PlanSpec> plans;  // --plans: all-reduce plans side by side at -e bytes.
  // Set where a lossy codec may run: f32 all-reduce of gradient-like values, checked by their
  // relative L2 error instead of exact equality.
  bool gaussian = false;
  std::vector<std::string> forwarded;  // Re-passed to the ranks in -n mode.
};

void Usage() {
  std::fprintf(stderr,
               "usage: hmc-perf [-n RANKS] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR]\n"
               "                [-c allreduce,reduce_scatter,allgather,broadcast,sendrecv|all]\n"
               "                [-d float|half|bfloat16|double|int32|int64|uint8]\n"
               "                [-o sum|avg|min|max|prod] [-r ROOT] [-i ITERS] [-w WARMUP]\n"
               "                [-k 0|1 (check)] [-J JSONL_FILE] [-P PROGRESS_AFTER_S]\n"
               "                [--probe] [--codec-bench]\n"
               "                [--plans 'algo=ring; algo=hierarchical codec_inter=int8; auto']\n"
               "                [--help-options]\n"
               "                [--OPTION=VALUE ...]\n");
}

double BusFactor(const std::string& collective, int n) {
  if (collective == "allreduce") return perf::AllReduceBusFactor(n);
  if (collective == "broadcast" || collective == "sendrecv") return 1.0;
  return static_cast<double>(n - 1) / n;
}

// Runs one collective on buffers sized for `bytes` (the larger of input and output).
// Runs one operation on buffers sized for `count` elements (the larger of input and output)
// and waits for it.
// An all-reduce's report goes to `report`.
absl::Status Run(Communicator& comm, const std::string& collective, const PerfArgs& a,
                 std::vector<uint8_t>& in, std::vector<uint8_t>& out, size_t count,
                 CollectiveReport* report = nullptr) {
  const int n = comm.size();
  Buffer whole_in{in.data(), count, a.dtype};
  Buffer whole_out{out.data(), count, a.dtype};
  if (collective == "allreduce") {
    std::shared_ptr<Work> work = comm.AllReduce(whole_in, whole_out, a.op);
    absl::Status s = work->Wait();
    if (report != nullptr) *report = work->report();
    return s;
  }
  if (collective == "broadcast") return comm.Broadcast(whole_in, whole_out, a.root)->Wait();
  if (collective == "reduce_scatter") {
    return comm.ReduceScatter(whole_in, Buffer{out.data(), count / n, a.dtype}, a.op)->Wait();
  }
  if (collective == "sendrecv") {
    // Every rank sends to the next and receives from the previous, at once.
    auto sent = comm.Send(whole_in, (comm.rank() + 1) % n);
    absl::Status received = comm.Recv(whole_out, (comm.rank() + n - 1) % n)->Wait();
    absl::Status s = sent->Wait();
    return s.ok() ? received : s;
  }
  return comm.AllGather(Buffer{in.data(), count / n, a.dtype}, whole_out)->Wait();
}

void FillInput(const std::string& collective, const PerfArgs& a, int rank, int n,
               std::vector<uint8_t>& in, size_t count) {
  if (a.gaussian) {
    auto* values = reinterpret_cast<float*>(in.data());
    for (size_t i = 0; i < count; ++i) values[i] = perf::GaussianValue(rank, i);
  } else if (collective == "allgather") {
    FillPattern(in.data(), count / n, a.dtype, rank, a.op);
  } else {
    FillPattern(in.data(), count, a.dtype, rank, a.op);
  }
}

size_t Check(const std::string& collective, const PerfArgs& a, int rank, int n,
             const std::vector<uint8_t>& out, size_t count) {
  if (collective == "allreduce")
    return CountReductionMismatches(out.data(), count, a.dtype, n, a.op);
  if (collective == "broadcast")
    return CountPatternMismatches(out.data(), count, a.dtype, a.root, a.op);
  if (collective == "sendrecv") {
    return CountPatternMismatches(out.data(), count, a.dtype, (rank + n - 1) % n, a.op);
  }
  const size_t block = count / n;
  if (collective == "reduce_scatter") {
    return CountReductionMismatches(out.data(), block, a.dtype, n, a.op, rank * block);
  }
  size_t wrong = 0;  // All-gather: rank r's block holds r's values.
  for (int r = 0; r < n; ++r) {
    wrong += CountPatternMismatches(out.data() + r * block * DTypeSize(a.dtype), block, a.dtype, r,
                                    a.op);
  }
  return wrong;
}

// The link matrix the communicator measured at creation (HMC_PROBE=1, the default; measured
// here if it was off): every link at once, as a butterfly uses them. Rank 0 prints it, with each
// rank's zone and the share of a butterfly all-reduce the tuner would give each rank.
int RunProbe(Communicator& comm) {
  if (!comm.links().measured()) {
    if (absl::Status s = comm.ProbeLinks(); !s.ok()) {
      std::fprintf(stderr, "hmc-perf: probe on rank %d: %s\n", comm.rank(), s.ToString().c_str());
      return 1;
    }
  }
  if (comm.rank() != 0) return 0;
  const LinkMatrix links = comm.links();
  std::printf("# hmc-perf probe: %d ranks; streams per peer %d\n", comm.size(),
              comm.stream_choice().streams);
  // Every rank logs its own ("hmc[placement]").
  std::printf("# placement of rank 0: %s\n", comm.placement().c_str());
  std::printf("%s", links.ToTable().c_str());
  const std::vector<double> bandwidth = links.PeerBandwidth();
  const std::vector<double> shares = BalancedShares(bandwidth);
  std::printf("# rank  zone                 Mbit/s (min of out, in)  balanced share\n");
  for (int r = 0; r < comm.size(); ++r) {
    std::printf("# %4d  %-20s %24.1f  %14.3f\n", r, comm.peers().peers[r].zone.c_str(),
                bandwidth[r], shares[r]);
  }
  std::printf("# auto codec (%s) encodes %.2f GB/s on the slowest rank's core\n", kAutoCodec,
              links.auto_codec_bytes_per_s / 1e9);
  return 0;
}

int RunRank(const Options& options, PerfArgs a) {
  absl::StatusOr<std::unique_ptr<Communicator>> created = Communicator::Create(options);
  if (!created.ok()) {
    std::fprintf(stderr, "hmc-perf: %s\n", created.status().ToString().c_str());
    return 1;
  }
  Communicator& comm = **created;
  if (a.probe) return RunProbe(comm);
  const int n = comm.size();
  const int rank = comm.rank();
  const size_t es = DTypeSize(a.dtype);
  std::vector<uint8_t> in(a.max_bytes + es), out(a.max_bytes + es);
  int64_t total_wrong = 0;
  std::unique_ptr<FILE, int (*)(FILE*)> json_file(nullptr, &std::fclose);
  if (rank == 0 && !a.json_path.empty()) {
    json_file.reset(std::fopen(a.json_path.c_str(), "a"));
    if (json_file == nullptr) {
      std::fprintf(stderr, "hmc-perf: cannot write %s\n", a.json_path.c_str());
      return 2;
    }
  }
  FILE* const json = json_file.get();
  const StreamChoice& streams = comm.stream_choice();
  if (rank == 0 && streams.probed) {
    std::printf(
        "# streams per peer: %d on long links, %d on short ones, chosen by the probe (%.0f ms per "
        "measurement; rank 0's incoming link, %.1f ms: 1 stream %.1f Mbit/s, %d streams %.1f "
        "Mbit/s, wants %d)\n",
        streams.long_streams, streams.short_streams, absl::ToDoubleMilliseconds(streams.window),
        streams.link_rtt_ms, streams.one_stream_mbit, streams.connections, streams.all_streams_mbit,
        streams.link_choice);
  }
  if (!a.plans.empty()) {
    return perf::ComparePlans(comm, a.plans, a.max_bytes, a.iterations, a.warmup);
  }
  const bool lossy = options.codec_inter != "none" || options.codec_intra != "none";
  for (const std::string& collective : a.collectives) {
    a.gaussian = lossy && collective == "allreduce" && a.dtype == DType::kF32 &&
                 (a.op == ReduceOp::kSum || a.op == ReduceOp::kAvg);
    if (rank == 0) {
      std::printf("# hmc-perf %s: %d ranks, dtype %s, op %s, algo %s, transport %s, streams %d\n",
                  collective.c_str(), n, std::string(DTypeName(a.dtype)).c_str(),
                  std::string(ReduceOpName(a.op)).c_str(), options.algo.c_str(),
                  options.transport.c_str(), streams.streams);
      perf::PrintTableHeader(stdout);
    }
    for (uint64_t bytes = a.min_bytes; bytes <= a.max_bytes;
         bytes = std::max<uint64_t>(bytes + 1, static_cast<uint64_t>(bytes * a.factor))) {
      // Element count rounded down to a multiple of the group size, as nccl-tests does.
      size_t count = bytes / es;
      if (collective == "reduce_scatter" || collective == "allgather") count -= count % n;
      if (count == 0) continue;
      FillInput(collective, a, rank, n, in, count);
      std::vector<double> every_call;  // Warm-up first, in order; the table times the rest.
      CollectiveReport report;
      // On stderr: stdout is the table that scripts parse.
      std::optional<ProgressLine> progress;
      if (rank == 0 && OutputWatched(STDERR_FILENO)) {
        progress.emplace(stderr, isatty(STDERR_FILENO) == 1);
      }
      const absl::Time size_start = absl::Now();
      const int calls = a.warmup + a.iterations;
      for (int it = 0; it < calls; ++it) {
        if (absl::Status s = comm.Barrier()->Wait(); !s.ok()) {
          std::fprintf(stderr, "hmc-perf: %s\n", s.ToString().c_str());
          return 1;
        }
        const absl::Time start = absl::Now();
        absl::Status s = Run(comm, collective, a, in, out, count, &report);
        const double us = absl::ToDoubleMicroseconds(absl::Now() - start);
        if (!s.ok()) {
          std::fprintf(stderr, "hmc-perf: rank %d: %s\n", rank, s.ToString().c_str());
          return 1;
        }
        // The call lasts until its slowest rank is done: this rank alone may finish early.
        double slowest = us;
        if (!perf::ReduceInPlace(comm, &slowest, 1, DType::kF64, ReduceOp::kMax)) return 1;
        every_call.push_back(slowest);
        // Only runs longer than a few seconds (-P) show progress.
        const absl::Time now = absl::Now();
        if (progress.has_value() && now - size_start >= absl::Seconds(a.progress_after_s) &&
            progress->Due(now)) {
          const double per_call = absl::ToDoubleSeconds(now - size_start) / (it + 1);
          progress->Show(absl::StrFormat("# %s of %d bytes: call %d/%d (%d warm-up), last %.3f s, "
                                         "%.0f s left",
                                         collective, bytes, it + 1, calls, a.warmup, slowest / 1e6,
                                         per_call * (calls - it - 1)),
                         now);
        }
      }
      if (progress.has_value()) progress->Clear();
      const double median_us =
          perf::Median(std::vector<double>(every_call.begin() + a.warmup, every_call.end()));
      int64_t wrong = 0;
      double l2_error = -1;
      if (a.check) {
        FillInput(collective, a, rank, n, in, count);
        std::memset(out.data(), 0, count * es);
        if (absl::Status s = Run(comm, collective, a, in, out, count); !s.ok()) {
          std::fprintf(stderr, "hmc-perf: rank %d: %s\n", rank, s.ToString().c_str());
          return 1;
        }
        if (a.gaussian) {
          l2_error =
              perf::GaussianError(a.op, n, reinterpret_cast<const float*>(out.data()), count);
          // Lossy or not, every rank must hold the same bits: compare checksums.
          int64_t sums[2] = {Checksum(std::span<const uint8_t>(out.data(), count * es)), 0};
          sums[1] = -sums[0];
          if (!perf::ReduceInPlace(comm, sums, 2, DType::kI64, ReduceOp::kMax)) return 1;
          if (sums[0] != -sums[1] && rank == 0) wrong = static_cast<int64_t>(count);
        } else {
          wrong = static_cast<int64_t>(Check(collective, a, rank, n, out, count));
        }
        if (!perf::ReduceInPlace(comm, &wrong, 1, DType::kI64, ReduceOp::kSum)) return 1;
      }
      total_wrong += wrong;
      const size_t size_bytes = count * es;
      // Egress of the last timed call, summed over ranks.
      double egress[2] = {report.egress_usd, static_cast<double>(report.bytes_sent_across_zones)};
      if (!perf::ReduceInPlace(comm, egress, 2, DType::kF64, ReduceOp::kSum)) return 1;
      const double algbw = size_bytes / median_us / 1e3;
      if (rank == 0) {
        const std::string redop = collective == "allreduce" || collective == "reduce_scatter"
                                      ? std::string(ReduceOpName(a.op))
                                      : "none";
        const double busbw = algbw * BusFactor(collective, n);
        const long long shown_wrong = a.check ? static_cast<long long>(wrong) : -1LL;
        perf::PrintTableRow(stdout, {size_bytes, count, std::string(DTypeName(a.dtype)), redop,
                                     median_us, algbw, busbw, shown_wrong});
        if (collective == "allreduce") {
          // The plan, rank 0's phases, the egress of all ranks and the error of lossy codecs.
          std::string phases;
          for (const auto& [phase, time] : report.phases) {
            absl::StrAppendFormat(&phases, "%s%s %.2f s", phases.empty() ? "; rank 0: " : ", ",
                                  phase, absl::ToDoubleSeconds(time));
          }
          std::printf(
              "#   %s (%s%s); across zones %.1f MB, egress $%.5f per call, $%.4f per GB "
              "averaged%s\n",
              report.algorithm.c_str(), report.plan.c_str(), phases.c_str(), egress[1] / 1e6,
              egress[0], egress[0] / (size_bytes / 1e9),
              l2_error >= 0 ? absl::StrFormat("; rel. L2 error %.2e", l2_error).c_str() : "");
        }
        if (json != nullptr) {
          std::fprintf(json,
                       "{\"system\":\"hmc\",\"collective\":\"%s\",\"ranks\":%d,\"bytes\":%zu,"
                       "\"count\":%zu,\"dtype\":\"%s\",\"redop\":\"%s\",\"algo\":\"%s\","
                       "\"streams\":%lld,\"time_us\":%.1f,\"algbw_gbps\":%.4f,"
                       "\"busbw_gbps\":%.4f,\"wrong\":%lld,\"warmup\":%d,\"call_us\":[%s]}\n",
                       collective.c_str(), n, size_bytes, count,
                       std::string(DTypeName(a.dtype)).c_str(), redop.c_str(), options.algo.c_str(),
                       static_cast<long long>(streams.streams), median_us, algbw, busbw,
                       shown_wrong, a.warmup,
                       absl::StrJoin(every_call, ",", [](std::string* out, double us) {
                         absl::StrAppendFormat(out, "%.1f", us);
                       }).c_str());
          std::fflush(json);
        }
      }
    }
  }
  if (rank == 0)
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(total_wrong),
                total_wrong == 0 ? "OK" : "FAILED");
  return total_wrong == 0 ? 0 : 3;
}

}  // namespace
}  // namespace hmc

int main(int argc, char** argv) {
  using hmc::PerfArgs;
  absl::StatusOr<hmc::Options> options = hmc::Options::FromEnvironment();
  if (!options.ok()) {
    std::fprintf(stderr, "hmc-perf: %s\n", options.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::vector<std::string>> rest =
      options->ApplyFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!rest.ok()) {
    std::fprintf(stderr, "hmc-perf: %s\n", rest.status().ToString().c_str());
    return 2;
  }
  PerfArgs a;
  const std::vector<std::string>& args = *rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help-options") {
      std::printf("%s", hmc::Options::DescribeAll().c_str());
      return 0;
    }
    if (flag == "--codec-bench") {
      a.codec_bench = true;
      continue;
    }
    if (flag == "--probe") {
      a.probe = true;
      a.forwarded.push_back(flag);
      continue;
    }
    if (flag == "-h" || flag == "--help") {
      hmc::Usage();
      return 0;
    }
    if (i + 1 >= args.size()) {
      hmc::Usage();
      return 2;
    }
    const std::string& value = args[++i];
    bool ok = true;
    if (flag == "-n") {
      ok = absl::SimpleAtoi(value, &a.np) && a.np > 0;
      continue;  // Not forwarded.
    } else if (flag == "-b") {
      ok = hmc::perf::ParseSize(value, &a.min_bytes);
    } else if (flag == "-e") {
      ok = hmc::perf::ParseSize(value, &a.max_bytes);
    } else if (flag == "-f") {
      ok = absl::SimpleAtod(value, &a.factor) && a.factor > 1;
    } else if (flag == "-c") {
      a.collectives = value == "all"
                          ? std::vector<std::string>{"allreduce", "reduce_scatter", "allgather",
                                                     "broadcast", "sendrecv"}
                          : absl::StrSplit(value, ',');
      for (const std::string& c : a.collectives) {
        ok &= c == "allreduce" || c == "reduce_scatter" || c == "allgather" || c == "broadcast" ||
              c == "sendrecv";
      }
    } else if (flag == "-d") {
      auto d = hmc::ParseDType(value);
      ok = d.ok();
      if (ok) a.dtype = *d;
    } else if (flag == "-o") {
      auto o = hmc::ParseReduceOp(value);
      ok = o.ok();
      if (ok) a.op = *o;
    } else if (flag == "-r") {
      ok = absl::SimpleAtoi(value, &a.root);
    } else if (flag == "-i") {
      ok = absl::SimpleAtoi(value, &a.iterations) && a.iterations > 0;
    } else if (flag == "-w") {
      ok = absl::SimpleAtoi(value, &a.warmup) && a.warmup >= 0;
    } else if (flag == "-J") {
      a.json_path = value;
    } else if (flag == "-P") {
      ok = absl::SimpleAtod(value, &a.progress_after_s) && a.progress_after_s >= 0;
    } else if (flag == "--plans") {
      absl::StatusOr<std::vector<hmc::perf::PlanSpec>> plans = hmc::perf::ParsePlans(value);
      if (!plans.ok()) {
        std::fprintf(stderr, "hmc-perf: %s\n", std::string(plans.status().message()).c_str());
        return 2;
      }
      a.plans = *plans;
    } else if (flag == "-k") {
      int check;
      ok = absl::SimpleAtoi(value, &check);
      a.check = check != 0;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "hmc-perf: bad argument %s %s\n", flag.c_str(), value.c_str());
      hmc::Usage();
      return 2;
    }
    a.forwarded.push_back(flag);
    a.forwarded.push_back(value);
  }
  if (a.codec_bench) return hmc::perf::RunCodecBench(a.max_bytes, a.iterations);
  if (a.np > 0 && options->coordinator.empty()) {
    hmc::LocalGroupSpec spec;
    spec.argv = {hmc::SelfExecutable(argv[0])};
    spec.argv.insert(spec.argv.end(), a.forwarded.begin(), a.forwarded.end());
    spec.ranks = a.np;
    spec.options = *options;
    spec.timeout = absl::Hours(2);
    absl::StatusOr<int> code = hmc::RunLocalGroup(spec);
    if (!code.ok()) {
      std::fprintf(stderr, "hmc-perf: %s\n", code.status().ToString().c_str());
      return 1;
    }
    return *code;
  }
  return hmc::RunRank(*options, a);
}
