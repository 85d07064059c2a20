// hmc-test-rank: one rank of the multi-process tests, started by them through a local group.
//
//   hmc-test-rank matrix [--large]   every collective × dtype × op × algorithm × size, checked
//                                    against a serial reference and for identical bits on all ranks
//   hmc-test-rank mismatch           rank 1 passes different arguments; all ranks must refuse the
//                                    call naming the difference, then run a correct one
//   hmc-test-rank endless            large all-reduces until a failure; exits with kExitNamedPeer
//                                    if the error names the rank given by --expect_failed=R
//   hmc-test-rank streams [--expect_local]  prints the stream probe's choice and measurements
//   hmc-test-rank links              prints the link matrix's bandwidths and shares, then runs a
//                                    weighted butterfly with int8 between zones
//   hmc-test-rank adapt              puts every link that leaves the host on one stream, then
//                                    runs checked 4 MiB all-reduces: prints the first and last
//                                    call's seconds and the streams the links then use
//
// Exit codes: 0 success, 1 setup error, 3 wrong result, 42/43 for endless (see below).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "collectives/allreduce_algorithms.h"
#include "collectives/communicator.h"
#include "collectives/group.h"
#include "collectives/link_probe.h"
#include "collectives/shares.h"
#include "collectives/stream_probe.h"
#include "core/frame.h"
#include "perf/check_pattern.h"

namespace hmc {
namespace {

constexpr int kExitNamedPeer = 42;   // Failed with an error naming the expected rank.
constexpr int kExitOtherError = 43;  // Failed, but the error does not name it.

struct Failure {
  std::string what;
};

class MatrixRunner {
 public:
  explicit MatrixRunner(Communicator& comm) : comm_(comm), n_(comm.size()), rank_(comm.rank()) {}

  int failures() const { return failures_; }
  int calls() const { return calls_; }

  void AllReduce(const std::string& algo, DType dtype, ReduceOp op, size_t count, bool in_place) {
    uint8_t* in = Input(count, dtype, rank_, op);
    uint8_t* dst = in_place ? in : Output(count, dtype);
    CallOptions call;
    call.algo = algo;
    absl::Status s =
        comm_.AllReduce(Buffer{in, count, dtype}, Buffer{dst, count, dtype}, op, call)->Wait();
    Verify(absl::StrFormat("allreduce %s %s %s count=%d%s", algo, DTypeName(dtype),
                           ReduceOpName(op), count, in_place ? " in-place" : ""),
           s, dst, count, dtype,
           [&] { return CountReductionMismatches(dst, count, dtype, n_, op); });
  }

  void ReduceScatter(DType dtype, ReduceOp op, size_t count) {
    uint8_t* in = Input(count * n_, dtype, rank_, op);
    uint8_t* out = Output(count, dtype);
    absl::Status s =
        comm_.ReduceScatter(Buffer{in, count * n_, dtype}, Buffer{out, count, dtype}, op)->Wait();
    Verify(
        absl::StrFormat("reduce_scatter %s %s count=%d", DTypeName(dtype), ReduceOpName(op), count),
        s, out, count, dtype,
        [&] { return CountReductionMismatches(out, count, dtype, n_, op, rank_ * count); },
        /*identical=*/false);
  }

  void AllGather(DType dtype, size_t count) {
    uint8_t* in = Input(count, dtype, rank_, ReduceOp::kSum);
    uint8_t* out = Output(count * n_, dtype);
    absl::Status s =
        comm_.AllGather(Buffer{in, count, dtype}, Buffer{out, count * n_, dtype})->Wait();
    Verify(absl::StrFormat("allgather %s count=%d", DTypeName(dtype), count), s, out, count * n_,
           dtype, [&] {
             size_t wrong = 0;  // Rank r's block holds r's values.
             for (int r = 0; r < n_; ++r) {
               wrong += CountPatternMismatches(out + r * count * DTypeSize(dtype), count, dtype, r,
                                               ReduceOp::kSum);
             }
             return wrong;
           });
  }

  void Broadcast(DType dtype, size_t count, int root) {
    uint8_t* in = Input(count, dtype, rank_, ReduceOp::kSum);
    uint8_t* out = Output(count, dtype);
    absl::Status s =
        comm_.Broadcast(Buffer{in, count, dtype}, Buffer{out, count, dtype}, root)->Wait();
    Verify(absl::StrFormat("broadcast %s count=%d root=%d", DTypeName(dtype), count, root), s, out,
           count, dtype,
           [&] { return CountPatternMismatches(out, count, dtype, root, ReduceOp::kSum); });
  }

  // Every rank sends to the next and receives from the previous one (both posted at once).
  void SendRecv(DType dtype, size_t count) {
    const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
    uint8_t* out = Input(count, dtype, rank_, ReduceOp::kSum);
    uint8_t* in = Output(count, dtype);
    auto sent = comm_.Send(Buffer{out, count, dtype}, next);
    auto received = comm_.Recv(Buffer{in, count, dtype}, prev);
    absl::Status s = sent->Wait();
    if (s.ok()) s = received->Wait();
    Verify(
        absl::StrFormat("sendrecv %s count=%d", DTypeName(dtype), count), s, in, count, dtype,
        [&] { return CountPatternMismatches(in, count, dtype, prev, ReduceOp::kSum); },
        /*identical=*/false);
  }

 private:
  // `count_wrong` counts the elements that differ from the reference; `identical`: every rank
  // must hold the same bytes (all but reduce-scatter and send/receive).
  void Verify(const std::string& what, const absl::Status& status, const uint8_t* data,
              size_t count, DType dtype, const std::function<size_t()>& count_wrong,
              bool identical = true) {
    ++calls_;
    if (!status.ok()) {
      Fail(what, std::string(status.message()));
      return;
    }
    const size_t wrong = count_wrong();
    if (wrong > 0)
      Fail(what, absl::StrFormat("%d of %d elements differ from the reference", wrong, count));
    if (!identical) return;
    // Every rank must hold the same bytes: compare checksums through the communicator.
    const size_t bytes = count * DTypeSize(dtype);
    std::vector<int64_t> sums(n_);
    int64_t mine = Checksum(std::span<const uint8_t>(data, bytes));
    absl::Status s = comm_
                         .AllGather(Buffer{&mine, 1, DType::kI64},
                                    Buffer{sums.data(), static_cast<size_t>(n_), DType::kI64})
                         ->Wait();
    if (!s.ok()) {
      Fail(what, absl::StrFormat("checksum exchange: %s", s.message()));
      return;
    }
    for (int r = 0; r < n_; ++r) {
      if (sums[r] != sums[0]) {
        Fail(what, absl::StrFormat("rank %d's bytes differ from rank 0's", r));
        return;
      }
    }
  }

  void Fail(const std::string& what, const std::string& why) {
    ++failures_;
    std::fprintf(stderr, "rank %d: FAILED %s: %s\n", rank_, what.c_str(), why.c_str());
  }

  // The calls' buffers, kept from call to call so that large ones are not faulted in afresh. The
  // input holds `rank`'s pattern; the output starts as 0xab in every byte, no result of the
  // pattern on up to ten ranks, so an element left unwritten is a mismatch. One spare byte keeps
  // data() non-null.
  uint8_t* Input(size_t count, DType dtype, int rank, ReduceOp op) {
    in_.resize(std::max(in_.size(), count * DTypeSize(dtype) + 1));
    FillPattern(in_.data(), count, dtype, rank, op);
    return in_.data();
  }
  uint8_t* Output(size_t count, DType dtype) {
    const size_t bytes = count * DTypeSize(dtype) + 1;
    out_.resize(std::max(out_.size(), bytes));
    std::fill_n(out_.begin(), bytes, uint8_t{0xab});
    return out_.data();
  }

  Communicator& comm_;
  const int n_;
  const int rank_;
  std::vector<uint8_t> in_, out_;
  int failures_ = 0;
  int calls_ = 0;
};

int RunMatrix(Communicator& comm, bool large) {
  MatrixRunner run(comm);
  const std::vector<size_t> sizes = {0, 1, 7, 1000003};
  for (const AllReduceAlgorithm& algorithm : AllReduceAlgorithms()) {
    const std::string algo(algorithm.name);
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllReduceOps) {
        for (size_t count : sizes) {
          // The largest size for every dtype with sum and every op with float keeps CI short.
          if (count > 1000 && op != ReduceOp::kSum && dtype != DType::kF32) continue;
          run.AllReduce(algo, dtype, op, count, /*in_place=*/false);
        }
      }
    }
    run.AllReduce(algo, DType::kBF16, ReduceOp::kAvg, 1000003, /*in_place=*/true);
    run.AllReduce(algo, DType::kI32, ReduceOp::kSum, 7, /*in_place=*/true);
  }
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t count : sizes) {
        if (count > 1000 && op != ReduceOp::kSum && dtype != DType::kF32) continue;
        run.ReduceScatter(dtype, op, count);
      }
    }
    for (size_t count : sizes) {
      run.SendRecv(dtype, count);
      run.AllGather(dtype, count);
      run.Broadcast(dtype, count, 0);
      run.Broadcast(dtype, count, comm.size() - 1);
    }
  }
  if (large) {
    const size_t count = (64 << 20) / sizeof(float);  // 64 MiB.
    run.AllReduce("ring", DType::kF32, ReduceOp::kSum, count, false);
    run.AllReduce("halving_doubling", DType::kF32, ReduceOp::kSum, count, false);
    run.ReduceScatter(DType::kF32, ReduceOp::kMax, count / comm.size());
    run.AllGather(DType::kF32, count / comm.size());
    run.Broadcast(DType::kF32, count, 1 % comm.size());
  }
  if (absl::Status s = comm.Barrier()->Wait(); !s.ok()) {
    std::fprintf(stderr, "rank %d: final barrier: %s\n", comm.rank(), s.ToString().c_str());
    return 3;
  }
  std::printf("rank %d: %d calls, %d failures\n", comm.rank(), run.calls(), run.failures());
  return run.failures() == 0 ? 0 : 3;
}

int RunMismatch(Communicator& comm) {
  // Whether `s` refused the call naming every one of `naming`; complains otherwise.
  auto refused = [&](const absl::Status& s, std::initializer_list<const char*> naming) {
    bool named = absl::IsInvalidArgument(s);
    for (const char* what : naming) named = named && absl::StrContains(s.message(), what);
    if (!named) {
      std::fprintf(stderr, "rank %d: expected a mismatch naming %s, got: %s\n", comm.rank(),
                   *naming.begin(), s.ToString().c_str());
    }
    return named;
  };
  std::vector<float> data(100, 1.0f);
  // Rank 1 passes 99 elements and max instead of sum.
  const bool odd = comm.rank() == 1;
  Buffer buffer{data.data(), odd ? 99u : 100u, DType::kF32};
  absl::Status s = comm.AllReduce(buffer, buffer, odd ? ReduceOp::kMax : ReduceOp::kSum)->Wait();
  if (!refused(s, {"count (rank 0=100, rank 1=99", "op (rank 0=sum, rank 1=max"})) return 3;
  std::printf("rank %d: refused as expected: %s\n", comm.rank(), std::string(s.message()).c_str());
  // A dtype mismatch: rank 0 passes int32.
  std::vector<int32_t> ints(100, 1);
  Buffer typed = comm.rank() == 0 ? Buffer{ints.data(), 100, DType::kI32}
                                  : Buffer{data.data(), 100, DType::kF32};
  s = comm.AllReduce(typed, typed, ReduceOp::kSum)->Wait();
  if (!refused(s, {"dtype (rank 0=int32"})) return 3;
  // A root mismatch in broadcast.
  s = comm.Broadcast(Buffer{data.data(), 100, DType::kF32}, Buffer{data.data(), 100, DType::kF32},
                     comm.rank() == 0 ? 0 : 1)
          ->Wait();
  if (!refused(s, {"root (rank 0=0, rank 1=1"})) return 3;
  // A count mismatch on the ring, whose first step left with the argument check: every rank drops
  // what reached it early.
  CallOptions ring;
  ring.algo = "ring";
  std::vector<float> long_data(300000, 1.0f);
  s = comm.AllReduce(Buffer{long_data.data(), odd ? 299999u : 300000u, DType::kF32},
                     Buffer{long_data.data(), odd ? 299999u : 300000u, DType::kF32}, ReduceOp::kSum,
                     ring)
          ->Wait();
  if (!refused(s, {"count (rank 0=300000, rank 1=299999"})) return 3;
  // No data was used and every rank agreed: the communicator still works.
  Buffer good{data.data(), 100, DType::kF32};
  s = comm.AllReduce(good, good, ReduceOp::kSum)->Wait();
  Buffer long_good{long_data.data(), long_data.size(), DType::kF32};
  if (s.ok()) s = comm.AllReduce(long_good, long_good, ReduceOp::kSum, ring)->Wait();
  const auto n = static_cast<float>(comm.size());
  if (!s.ok() || data[0] != n || long_data.front() != n || long_data.back() != n) {
    std::fprintf(stderr, "rank %d: allreduce after the mismatches failed: %s (values %g, %g, %g)\n",
                 comm.rank(), s.ToString().c_str(), data[0], long_data.front(), long_data.back());
    return 3;
  }
  return 0;
}

int RunEndless(Communicator& comm, int expect_failed) {
  std::vector<float> data((16 << 20) / sizeof(float), 1.0f);
  Buffer buffer{data.data(), data.size(), DType::kF32};
  for (int i = 0; i < 100000; ++i) {
    absl::Status s = comm.AllReduce(buffer, buffer, ReduceOp::kAvg)->Wait();
    if (i == 0 && s.ok()) {
      std::printf("rank %d: running\n", comm.rank());
      std::fflush(stdout);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: allreduce %d failed: %s\n", comm.rank(), i,
                   s.ToString().c_str());
      return absl::StrContains(s.message(), absl::StrFormat("rank %d ", expect_failed))
                 ? kExitNamedPeer
                 : kExitOtherError;
    }
  }
  return 0;
}

// Prints what the stream probe chose and measured on this rank, for the test to check. With
// `expect_local`, fails unless the group saw that no link leaves the host.
int PrintStreams(Communicator& comm, bool expect_local) {
  const StreamChoice& c = comm.stream_choice();
  std::printf("streams %d probed %d long %d short %d rtt %.3f one %.2f all %.2f link %d\n",
              c.streams, c.probed ? 1 : 0, c.long_streams, c.short_streams, c.link_rtt_ms,
              c.one_stream_mbit, c.all_streams_mbit, c.link_choice);
  if (expect_local && (c.probed || c.streams != kLocalStreams)) {
    std::fprintf(stderr, "rank %d: expected %d streams without a probe\n", comm.rank(),
                 kLocalStreams);
    return 1;
  }
  return 0;
}

// The link matrix and the shares it gives: prints each rank's bandwidth and balanced share, the
// round trip to rank 0, then runs a butterfly all-reduce with those shares and int8 between zones
// (it fails if ranks hold different matrices: their plans' fingerprints differ) and checks that
// every rank holds the same bits, close to the exact sum.
int PrintLinks(Communicator& comm) {
  const LinkMatrix links = comm.links();
  if (!links.measured()) {
    std::fprintf(stderr, "rank %d: no link matrix\n", comm.rank());
    return 1;
  }
  const std::vector<double> bandwidth = links.PeerBandwidth();
  const std::vector<double> shares = BalancedShares(bandwidth);
  for (int r = 0; r < comm.size(); ++r) {
    std::printf("rank %d mbit %.2f share %.3f rtt_ms %.2f\n", r, bandwidth[r], shares[r],
                links.rtt(r, 0));
  }
  constexpr size_t kCount = 1 << 18;
  std::vector<float> data(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>((i % 101) * (comm.rank() + 1));
  CallOptions call;
  call.algo = "butterfly";
  call.codec_inter = "int8";
  Buffer b{data.data(), kCount, DType::kF32};
  auto work = comm.AllReduce(b, b, ReduceOp::kSum, call);
  if (absl::Status s = work->Wait(); !s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", comm.rank(), s.ToString().c_str());
    return 1;
  }
  const double ranks_sum = comm.size() * (comm.size() + 1) / 2.0;
  double worst = 0;
  for (size_t i = 0; i < kCount; ++i) {
    worst = std::max(worst, std::fabs(data[i] - (i % 101) * ranks_sum) / (100 * ranks_sum));
  }
  int64_t sums[2] = {Checksum(std::span<const uint8_t>(reinterpret_cast<uint8_t*>(data.data()),
                                                       kCount * sizeof(float))),
                     0};
  sums[1] = -sums[0];
  if (!comm.AllReduce(Buffer{sums, 2, DType::kI64}, Buffer{sums, 2, DType::kI64}, ReduceOp::kMax)
           ->Wait()
           .ok()) {
    return 1;
  }
  std::printf("identical %d error %.5f egress_usd %.6f plan %s\n", sums[0] == -sums[1] ? 1 : 0,
              worst, work->report().egress_usd, work->report().plan.c_str());
  return 0;
}

// Every link that leaves the host starts on one stream; then 4 MiB all-reduces (segments of
// 512 KiB: the adapter's smallest size class) run until one takes under a third of the first
// call's time, or 30 calls. Each result is checked. Prints the first and last call's seconds and
// the fewest streams any of those links now spreads a segment over.
int RunAdapt(Communicator& comm) {
  constexpr size_t kCount = 1 << 20;
  constexpr size_t kSegment = 512 << 10;
  const std::shared_ptr<const Group> g = comm.group();
  for (const std::shared_ptr<Channel>& c : g->channels) {
    if (c != nullptr && !c->local()) c->parallel_streams()->SetActiveStreams(1);
  }
  const int n = comm.size();
  std::vector<float> data(kCount);
  double first = 0, last = 0;
  int calls = 0;
  // The ranks stop together: one that stopped on its own timing while its peer wanted another
  // call would leave that peer's all-reduce to a closed channel.
  bool more = true;
  while (more) {
    std::fill(data.begin(), data.end(), static_cast<float>(comm.rank() + 1));
    const absl::Time start = absl::Now();
    if (absl::Status s = comm.AllReduce(Buffer{data.data(), kCount, DType::kF32},
                                        Buffer{data.data(), kCount, DType::kF32}, ReduceOp::kSum)
                             ->Wait();
        !s.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", comm.rank(), s.ToString().c_str());
      return 1;
    }
    last = absl::ToDoubleSeconds(absl::Now() - start);
    if (calls++ == 0) first = last;
    const float expected = static_cast<float>(n * (n + 1) / 2);
    if (std::any_of(data.begin(), data.end(), [&](float v) { return v != expected; })) {
      std::fprintf(stderr, "rank %d: wrong sum in call %d\n", comm.rank(), calls);
      return 3;
    }
    float wants_more = calls < 30 && last * 4 > first ? 1.0f : 0.0f;
    if (absl::Status s = comm.AllReduce(Buffer{&wants_more, 1, DType::kF32},
                                        Buffer{&wants_more, 1, DType::kF32}, ReduceOp::kMax)
                             ->Wait();
        !s.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", comm.rank(), s.ToString().c_str());
      return 1;
    }
    more = wants_more > 0;
  }
  int fewest = 64;
  for (const std::shared_ptr<Channel>& c : g->channels) {
    if (c != nullptr && !c->local())
      fewest = std::min(fewest, c->parallel_streams()->streams_for(kSegment));
  }
  std::printf("first %.3f last %.3f calls %d streams %d\n", first, last, calls, fewest);
  return 0;
}

}  // namespace
}  // namespace hmc

int main(int argc, char** argv) {
  absl::StatusOr<hmc::Options> options = hmc::Options::FromEnvironment();
  if (!options.ok() || argc < 2) {
    std::fprintf(stderr,
                 "usage: hmc-test-rank matrix|mismatch|endless|streams|links|adapt [flags]\n");
    return 1;
  }
  const std::string mode = argv[1];
  bool large = false;
  bool expect_local = false;
  int expect_failed = -1;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--large") large = true;
    if (arg == "--expect_local") expect_local = true;
    if (absl::StartsWith(arg, "--expect_failed=")) {
      if (!absl::SimpleAtoi(arg.substr(16), &expect_failed)) return 1;
    }
  }
  absl::StatusOr<std::unique_ptr<hmc::Communicator>> comm = hmc::Communicator::Create(*options);
  if (!comm.ok()) {
    std::fprintf(stderr, "hmc-test-rank: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  if (mode == "matrix") return hmc::RunMatrix(**comm, large);
  if (mode == "mismatch") return hmc::RunMismatch(**comm);
  if (mode == "endless") return hmc::RunEndless(**comm, expect_failed);
  if (mode == "streams") return hmc::PrintStreams(**comm, expect_local);
  if (mode == "links") return hmc::PrintLinks(**comm);
  if (mode == "adapt") return hmc::RunAdapt(**comm);
  return 1;
}
