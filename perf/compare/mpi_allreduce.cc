// hmc-mpi-allreduce: Open MPI's MPI_Allreduce measured the way hmc-perf measures hmc, for
// side-by-side runs (Debian's libopenmpi-dev). Started by mpirun, one process per rank:
//
//   mpirun --allow-run-as-root --oversubscribe -np 4 --mca pml ob1 --mca btl tcp,self
//          build/bin/hmc-mpi-allreduce -b 64M -e 64M
//
// In place, f32 sum; every iteration starts after MPI_Barrier and lasts until its slowest rank is
// done, time is the median, and #wrong compares a final run with the serial reference that
// hmc-perf uses.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "perf/check_pattern.h"
#include "perf/perf_table.h"

namespace {

bool ParseArgs(int argc, char** argv, hmc::perf::Sweep* sweep) {
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc || !hmc::perf::ParseSweepFlag(argv[i], argv[i + 1], sweep)) return false;
  }
  return sweep->min_bytes <= sweep->max_bytes;
}

// Runs and times one size; returns the number of wrong elements of the checked run (all ranks),
// or -1 without a check.
long long RunSize(int rank, int size, const hmc::perf::Sweep& a, uint64_t bytes,
                  std::vector<float>& data) {
  const int count = static_cast<int>(bytes / sizeof(float));
  std::vector<double> times;
  for (int it = 0; it < a.warmup + a.iterations; ++it) {
    MPI_Barrier(MPI_COMM_WORLD);
    const absl::Time start = absl::Now();
    MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double slowest = absl::ToDoubleMicroseconds(absl::Now() - start);  // Until every rank is done.
    MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (it >= a.warmup) times.push_back(slowest);
  }
  long long wrong = -1;
  if (a.check) {
    hmc::FillPattern(data.data(), count, hmc::DType::kF32, rank, hmc::ReduceOp::kSum);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    wrong = static_cast<long long>(hmc::CountReductionMismatches(
        data.data(), count, hmc::DType::kF32, size, hmc::ReduceOp::kSum));
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
  if (rank == 0) {
    const double us = hmc::perf::Median(times);
    const double algbw = count * sizeof(float) / us / 1e3;
    hmc::perf::PrintTableRow(
        stdout, {count * sizeof(float), static_cast<uint64_t>(count), "float", "sum", us, algbw,
                 algbw * hmc::perf::AllReduceBusFactor(size), wrong});
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  hmc::perf::Sweep a;
  if (!ParseArgs(argc, argv, &a)) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "usage: hmc-mpi-allreduce [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-i ITERS] "
                   "[-w WARMUP] [-k 0|1]\n");
    }
    MPI_Finalize();
    return 2;
  }
  if (rank == 0) {
    std::printf("# mpi allreduce: %d ranks, dtype float, op sum\n", size);
    hmc::perf::PrintTableHeader(stdout);
  }
  std::vector<float> data(a.max_bytes / sizeof(float));
  long long wrong = 0;
  for (uint64_t bytes = a.min_bytes; bytes <= a.max_bytes;
       bytes = hmc::perf::NextSize(bytes, a.factor)) {
    wrong += std::max(0LL, RunSize(rank, size, a, bytes, data));
  }
  MPI_Finalize();
  return wrong == 0 ? 0 : 3;
}
