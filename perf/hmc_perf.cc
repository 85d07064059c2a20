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
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "collectives/check_pattern.h"
#include "collectives/communicator.h"
#include "launcher/local_group.h"
#include "launcher/process.h"
#include "perf/codec_bench.h"
#include "perf/perf_table.h"

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
  std::string json_path;     // -J: also append one JSON object per row to this file.
  bool probe = false;        // --probe: the RTT and bandwidth matrix instead of collectives.
  bool codec_bench = false;  // --codec-bench: codec speed and error on this core, no group.
  std::vector<std::string> forwarded;  // Re-passed to the ranks in -n mode.
};

void Usage() {
  std::fprintf(stderr,
               "usage: hmc-perf [-n RANKS] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR]\n"
               "                [-c allreduce,reduce_scatter,allgather,broadcast,sendrecv|all]\n"
               "                [-d float|half|bfloat16|double|int32|int64|uint8]\n"
               "                [-o sum|avg|min|max|prod] [-r ROOT] [-i ITERS] [-w WARMUP]\n"
               "                [-k 0|1 (check)] [-J JSONL_FILE] [--probe] [--codec-bench]\n"
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
absl::Status Run(Communicator& comm, const std::string& collective, const PerfArgs& a,
                 std::vector<uint8_t>& in, std::vector<uint8_t>& out, size_t count) {
  const int n = comm.size();
  Buffer whole_in{in.data(), count, a.dtype};
  Buffer whole_out{out.data(), count, a.dtype};
  if (collective == "allreduce") return comm.AllReduce(whole_in, whole_out, a.op)->Wait();
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
  if (collective == "allgather") {
    FillPattern(in.data(), count / n, a.dtype, rank, a.op);
  } else {
    FillPattern(in.data(), count, a.dtype, rank, a.op);
  }
}

size_t Check(const std::string& collective, const PerfArgs& a, int rank, int n,
             const std::vector<uint8_t>& out, size_t count) {
  if (collective == "allreduce") {
    return CountMismatches(out.data(), count, a.dtype,
                           [&](size_t i) { return ReferenceReduction(n, i, a.dtype, a.op); });
  }
  if (collective == "broadcast") {
    return CountMismatches(out.data(), count, a.dtype,
                           [&](size_t i) { return PatternValue(a.root, i, a.dtype, a.op); });
  }
  if (collective == "sendrecv") {
    const int prev = (rank + n - 1) % n;
    return CountMismatches(out.data(), count, a.dtype,
                           [&](size_t i) { return PatternValue(prev, i, a.dtype, a.op); });
  }
  const size_t block = count / n;
  if (collective == "reduce_scatter") {
    return CountMismatches(out.data(), block, a.dtype, [&](size_t i) {
      return ReferenceReduction(n, rank * block + i, a.dtype, a.op);
    });
  }
  return CountMismatches(out.data(), block * n, a.dtype, [&](size_t i) {
    return PatternValue(static_cast<int>(i / block), i % block, a.dtype, a.op);
  });
}

// The network profile of the group: for every ordered pair of ranks in turn (the others wait at a
// barrier), the median RTT of `kPings` one-byte ping-pongs and the bandwidth of one message of
// a.max_bytes (its time less one RTT, which covers the latency and the one-byte answer). Rank 0
// prints both matrices, row = from, column = to.
int RunProbe(Communicator& comm, const PerfArgs& a) {
  constexpr int kPings = 5;
  const int n = comm.size();
  const int rank = comm.rank();
  std::vector<double> rtt_ms(n * n, 0), mbit(n * n, 0);
  std::vector<uint8_t> payload(a.max_bytes);
  uint8_t byte = 0;
  Buffer one{&byte, 1, DType::kU8};
  Buffer big{payload.data(), payload.size(), DType::kU8};
  auto check = [&](const absl::Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "hmc-perf: probe on rank %d: %s\n", rank, s.ToString().c_str());
    }
    return s.ok();
  };
  for (int from = 0; from < n; ++from) {
    for (int to = 0; to < n; ++to) {
      if (from == to) continue;
      if (!check(comm.Barrier()->Wait())) return 1;
      if (rank == from) {
        std::vector<double> samples;
        for (int p = 0; p < kPings; ++p) {
          const absl::Time start = absl::Now();
          if (!check(comm.Send(one, to)->Wait()) || !check(comm.Recv(one, to)->Wait())) return 1;
          samples.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
        }
        std::sort(samples.begin(), samples.end());
        const double rtt = samples[kPings / 2];
        const absl::Time start = absl::Now();
        if (!check(comm.Send(big, to)->Wait()) || !check(comm.Recv(one, to)->Wait())) return 1;
        const double seconds =
            std::max(1e-6, absl::ToDoubleSeconds(absl::Now() - start) - rtt / 1e3);
        rtt_ms[from * n + to] = rtt;
        mbit[from * n + to] = payload.size() * 8 / seconds / 1e6;
      } else if (rank == to) {
        for (int p = 0; p < kPings; ++p) {
          if (!check(comm.Recv(one, from)->Wait()) || !check(comm.Send(one, from)->Wait())) {
            return 1;
          }
        }
        if (!check(comm.Recv(big, from)->Wait()) || !check(comm.Send(one, from)->Wait())) return 1;
      }
    }
  }
  // Each rank measured its own row; a sum gathers the matrices everywhere.
  for (std::vector<double>* m : {&rtt_ms, &mbit}) {
    Buffer b{m->data(), m->size(), DType::kF64};
    if (!check(comm.AllReduce(b, b, ReduceOp::kSum)->Wait())) return 1;
  }
  if (rank != 0) return 0;
  const PeerTable& peers = comm.peers();
  auto print = [&](const char* title, const std::vector<double>& m, const char* format) {
    std::printf("# %s (row: from, column: to)\n%-24s", title, "#");
    for (int c = 0; c < n; ++c) std::printf(" %10d", c);
    std::printf("\n");
    for (int r = 0; r < n; ++r) {
      std::string label = absl::StrCat(r);
      if (r < static_cast<int>(peers.peers.size())) {
        label = absl::StrFormat("%d %s", r, peers.peers[r].zone);
      }
      std::printf("%-24s", label.substr(0, 24).c_str());
      for (int c = 0; c < n; ++c) {
        if (r == c) {
          std::printf(" %10s", "-");
        } else {
          std::printf(format, m[r * n + c]);
        }
      }
      std::printf("\n");
    }
  };
  std::printf("# hmc-perf probe: %d ranks, %d pings, %zu-byte transfers\n", n, kPings,
              payload.size());
  print("RTT (ms)", rtt_ms, " %10.2f");
  print("bandwidth (Mbit/s)", mbit, " %10.0f");
  return 0;
}

int RunRank(const Options& options, const PerfArgs& a) {
  absl::StatusOr<std::unique_ptr<Communicator>> created = Communicator::Create(options);
  if (!created.ok()) {
    std::fprintf(stderr, "hmc-perf: %s\n", created.status().ToString().c_str());
    return 1;
  }
  Communicator& comm = **created;
  if (a.probe) return RunProbe(comm, a);
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
        "# streams per peer: %d, chosen by the probe (%.0f ms per measurement; rank 0's "
        "incoming link: 1 stream %.1f Mbit/s, %d streams %.1f Mbit/s, wants %d)\n",
        streams.streams, absl::ToDoubleMilliseconds(streams.window), streams.one_stream_mbit,
        streams.connections, streams.all_streams_mbit, streams.link_choice);
  }
  for (const std::string& collective : a.collectives) {
    if (rank == 0) {
      std::printf("# hmc-perf %s: %d ranks, dtype %s, op %s, algo %s, streams %d\n",
                  collective.c_str(), n, std::string(DTypeName(a.dtype)).c_str(),
                  std::string(ReduceOpName(a.op)).c_str(), options.algo.c_str(), streams.streams);
      perf::PrintTableHeader(stdout);
    }
    for (uint64_t bytes = a.min_bytes; bytes <= a.max_bytes;
         bytes = std::max<uint64_t>(bytes + 1, static_cast<uint64_t>(bytes * a.factor))) {
      // Element count rounded down to a multiple of the group size, as nccl-tests does.
      size_t count = bytes / es;
      if (collective == "reduce_scatter" || collective == "allgather") count -= count % n;
      if (count == 0) continue;
      FillInput(collective, a, rank, n, in, count);
      std::vector<double> times;
      for (int it = 0; it < a.warmup + a.iterations; ++it) {
        if (absl::Status s = comm.Barrier()->Wait(); !s.ok()) {
          std::fprintf(stderr, "hmc-perf: %s\n", s.ToString().c_str());
          return 1;
        }
        const absl::Time start = absl::Now();
        absl::Status s = Run(comm, collective, a, in, out, count);
        const double us = absl::ToDoubleMicroseconds(absl::Now() - start);
        if (!s.ok()) {
          std::fprintf(stderr, "hmc-perf: rank %d: %s\n", rank, s.ToString().c_str());
          return 1;
        }
        // The call lasts until its slowest rank is done: this rank alone may finish early.
        double slowest = us;
        const Buffer slowest_buffer{&slowest, 1, DType::kF64};
        if (absl::Status m = comm.AllReduce(slowest_buffer, slowest_buffer, ReduceOp::kMax)->Wait();
            !m.ok()) {
          std::fprintf(stderr, "hmc-perf: rank %d: %s\n", rank, m.ToString().c_str());
          return 1;
        }
        if (it >= a.warmup) times.push_back(slowest);
      }
      const double median_us = perf::Median(times);
      int64_t wrong = 0;
      if (a.check) {
        FillInput(collective, a, rank, n, in, count);
        std::memset(out.data(), 0, count * es);
        if (absl::Status s = Run(comm, collective, a, in, out, count); !s.ok()) {
          std::fprintf(stderr, "hmc-perf: rank %d: %s\n", rank, s.ToString().c_str());
          return 1;
        }
        wrong = static_cast<int64_t>(Check(collective, a, rank, n, out, count));
        if (absl::Status s = comm.AllReduce(Buffer{&wrong, 1, DType::kI64},
                                            Buffer{&wrong, 1, DType::kI64}, ReduceOp::kSum)
                                 ->Wait();
            !s.ok()) {
          std::fprintf(stderr, "hmc-perf: rank %d: %s\n", rank, s.ToString().c_str());
          return 1;
        }
      }
      total_wrong += wrong;
      const size_t size_bytes = count * es;
      const double algbw = size_bytes / median_us / 1e3;
      if (rank == 0) {
        const std::string redop = collective == "allreduce" || collective == "reduce_scatter"
                                      ? std::string(ReduceOpName(a.op))
                                      : "none";
        const double busbw = algbw * BusFactor(collective, n);
        const long long shown_wrong = a.check ? static_cast<long long>(wrong) : -1LL;
        perf::PrintTableRow(stdout, {size_bytes, count, std::string(DTypeName(a.dtype)), redop,
                                     median_us, algbw, busbw, shown_wrong});
        if (json != nullptr) {
          std::fprintf(json,
                       "{\"system\":\"hmc\",\"collective\":\"%s\",\"ranks\":%d,\"bytes\":%zu,"
                       "\"count\":%zu,\"dtype\":\"%s\",\"redop\":\"%s\",\"algo\":\"%s\","
                       "\"streams\":%lld,\"time_us\":%.1f,\"algbw_gbps\":%.4f,"
                       "\"busbw_gbps\":%.4f,\"wrong\":%lld}\n",
                       collective.c_str(), n, size_bytes, count,
                       std::string(DTypeName(a.dtype)).c_str(), redop.c_str(), options.algo.c_str(),
                       static_cast<long long>(streams.streams), median_us, algbw, busbw,
                       shown_wrong);
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
