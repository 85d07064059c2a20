// Collectives on threads over the inproc transport: fast, deterministic, and a TSan target for the
// algorithms and the communicator.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "collectives/arg_check.h"
#include "collectives/communicator.h"
#include "core/frame.h"
#include "core/mutex.h"
#include "perf/check_pattern.h"
#include "tests/testing/inproc_group.h"
#include "transports/inproc/inproc_transport.h"

namespace hmc {
namespace {

struct Case {
  int ranks;
  const char* algo;
  const char* zones = "";   // One letter per rank: its zone.
  const char* shares = "";  // Butterfly weights per rank ("" = equal).
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.algo << " on " << c.ranks << " ranks" << (*c.zones ? " in zones " : "") << c.zones
      << (*c.shares ? " with shares " : "") << c.shares;
}

class InprocAllReduce : public testing::TestWithParam<Case> {};

TEST_P(InprocAllReduce, MatchesReferenceAndIsBitIdentical) {
  const Case c = GetParam();
  std::vector<std::string> zones;
  for (const char* z = c.zones; *z != 0; ++z) zones.emplace_back(1, *z);
  Options options;
  if (*c.shares) options.shares = c.shares;
  RunGroup(
      c.ranks,
      [&](int rank, Communicator& comm) {
        for (DType dtype : kAllDTypes) {
          for (ReduceOp op : kAllReduceOps) {
            for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1031}, size_t{40009}}) {
              const size_t es = DTypeSize(dtype);
              std::vector<uint8_t> in(count * es + 1), out(count * es + 1);
              FillPattern(in.data(), count, dtype, rank, op);
              CallOptions call;
              call.algo = c.algo;
              absl::Status s = comm.AllReduce(Buffer{in.data(), count, dtype},
                                              Buffer{out.data(), count, dtype}, op, call)
                                   ->Wait();
              ASSERT_TRUE(s.ok()) << s;
              EXPECT_EQ(CountReductionMismatches(out.data(), count, dtype, c.ranks, op), 0u)
                  << c.algo << " " << DTypeName(dtype) << " " << ReduceOpName(op) << " " << count;
            }
          }
        }
      },
      options, zones);
}

INSTANTIATE_TEST_SUITE_P(
    Groups, InprocAllReduce,
    testing::Values(Case{1, "ring"}, Case{2, "ring"}, Case{3, "ring"}, Case{5, "ring"},
                    Case{2, "halving_doubling"}, Case{3, "halving_doubling"},
                    Case{4, "halving_doubling"}, Case{6, "halving_doubling"},
                    Case{7, "halving_doubling"}, Case{2, "one_shot"}, Case{3, "one_shot"},
                    Case{4, "one_shot", "aabb"},
                    // Even zones, uneven zones (a zone of one holds every
                    // shard), ranks of a zone not adjacent, and one zone.
                    Case{4, "hierarchical", "aabb"}, Case{6, "hierarchical", "aaabbc"},
                    Case{5, "hierarchical", "ababa"}, Case{3, "hierarchical", "aaa"},
                    // Equal shares; weighted ones, one of them zero.
                    Case{2, "butterfly"}, Case{3, "butterfly"}, Case{5, "butterfly", "aabbc"},
                    Case{4, "butterfly", "", "1,0,3,2.5"}, Case{3, "butterfly", "", "0,0,1"}),
    [](const testing::TestParamInfo<Case>& info) {
      return std::string(info.param.algo) + "_" + std::to_string(info.param.ranks) + "_ranks" +
             (*info.param.zones ? std::string("_") + info.param.zones : "") +
             (*info.param.shares ? "_weighted" + std::to_string(info.index) : "");
    });

// The argument check exchanges small messages with every peer; counting bytes needs it off.
Options NoArgumentCheck() {
  Options options;
  options.check_args = false;
  return options;
}

// Zones a = {0, 1}, b = {2, 3}: rank 1 holds shard 1, so its cross-zone partner is rank 3 (the
// holder of shard 1 in b), never rank 2 (which a ring would send to); its shard crosses once
// each way, a third of what a flat ring sends over each of its cross-zone links.
TEST(InprocCollectives, HierarchicalCrossesZonesOnlyBetweenShardHolders) {
  constexpr size_t kCount = 1 << 16;
  RunGroup(4,
           [&](int rank, Communicator& comm) {
             std::vector<float> data(kCount, 1.0f + rank);
             CallOptions call;
             call.algo = "hierarchical";
             Buffer b{data.data(), kCount, DType::kF32};
             ASSERT_TRUE(comm.AllReduce(b, b, ReduceOp::kSum, call)->Wait().ok());
             EXPECT_EQ(data[kCount - 1], 10.0f);
             const std::vector<LinkStats> stats = comm.link_stats();
             const int same_zone = rank ^ 1, partner = rank ^ 2, other = rank ^ 3;
             EXPECT_GT(stats[same_zone].bytes_sent, 0u);
             EXPECT_GT(stats[partner].bytes_sent, 0u);
             EXPECT_EQ(stats[other].bytes_sent, 0u) << "rank " << rank;
             // A two-rank ring all-reduce of the shard (half the vector) sends the shard's size.
             EXPECT_EQ(stats[partner].bytes_sent, kCount * sizeof(float) / 2) << "rank " << rank;
           },
           NoArgumentCheck(), {"a", "a", "b", "b"});
}

// Zones a = {0, 1} and b = {2, 3}, and zone b calls late: a's holders finish their zone's
// exchange first and must send nothing across zones until the shard's holder in b has finished
// b's (what they sent early would meet b's exchange in that holder's NIC). Then all is exact.
TEST(InprocCollectives, HierarchicalCrossesZonesOnlyOnceEveryHolderIsDoneInItsZone) {
  constexpr size_t kCount = 1 << 16;
  constexpr uint64_t kHalf = kCount * sizeof(float) / 2;  // What a rank sends its zone mate.
  std::atomic<Communicator*> comms[4] = {};
  RunGroup(4,
           [&](int rank, Communicator& comm) {
             comms[rank] = &comm;
             if (rank >= 2) {
               // Until a's exchange is over (bounded), then a little longer.
               for (int wait = 0; wait < 3000; ++wait) {
                 Communicator* a0 = comms[0];
                 Communicator* a1 = comms[1];
                 if (a0 != nullptr && a1 != nullptr && a0->link_stats()[1].bytes_sent >= kHalf &&
                     a1->link_stats()[0].bytes_sent >= kHalf) {
                   break;
                 }
                 absl::SleepFor(absl::Milliseconds(10));
               }
               absl::SleepFor(absl::Milliseconds(100));
               ASSERT_TRUE(comms[0] != nullptr && comms[1] != nullptr) << "zone a never started";
               ASSERT_GE(comms[0].load()->link_stats()[1].bytes_sent, kHalf);
               for (int a : {0, 1}) {
                 EXPECT_EQ(comms[a].load()->link_stats()[rank].bytes_sent, 0u)
                     << "rank " << a << " sent to rank " << rank << " before it was ready";
               }
             }
             std::vector<float> data(kCount, 1.0f + rank);
             CallOptions call;
             call.algo = "hierarchical";
             Buffer b{data.data(), kCount, DType::kF32};
             ASSERT_TRUE(comm.AllReduce(b, b, ReduceOp::kSum, call)->Wait().ok());
             EXPECT_EQ(data[0], 10.0f);
             EXPECT_EQ(data[kCount - 1], 10.0f);
           },
           NoArgumentCheck(), {"a", "a", "b", "b"});
}

// The hierarchical plan's in-zone exchange measures the rate its sends leave at, which later
// calls keep, and its cross-zone exchange (three holders: two links each) shares among its links;
// a flat butterfly never paces (butterfly.h). With pacing off nothing is measured or paced.
TEST(InprocCollectives, HierarchicalMeasuresTheSendingRateThatItsCrossZoneLinksShare) {
  for (const bool pace : {true, false}) {
    Options options;
    options.pace_sends = pace;
    RunGroup(6,
             [&](int rank, Communicator& comm) {
               std::vector<float> data(1 << 16, 1.0f + rank);
               Buffer b{data.data(), data.size(), DType::kF32};
               CallOptions call;
               call.algo = "ring";
               auto ring = comm.AllReduce(b, b, ReduceOp::kSum, call);
               ASSERT_TRUE(ring->Wait().ok());
               EXPECT_EQ(ring->report().send_bytes_per_s, 0) << "the ring measures nothing";
               call.algo = "hierarchical";
               auto hierarchical = comm.AllReduce(b, b, ReduceOp::kSum, call);
               ASSERT_TRUE(hierarchical->Wait().ok());
               const double measured = hierarchical->report().send_bytes_per_s;
               call.algo = "butterfly";
               auto butterfly = comm.AllReduce(b, b, ReduceOp::kSum, call);
               ASSERT_TRUE(butterfly->Wait().ok());
               EXPECT_EQ(butterfly->report().paced_links, 0) << "rank " << rank;
               if (pace) {
                 EXPECT_GT(measured, 0) << "rank " << rank;
                 EXPECT_GE(hierarchical->report().paced_links, 2) << "rank " << rank;
                 EXPECT_GE(butterfly->report().send_bytes_per_s, measured) << "rank " << rank;
               } else {
                 EXPECT_EQ(measured, 0) << "rank " << rank;
                 EXPECT_EQ(hierarchical->report().paced_links, 0) << "rank " << rank;
                 EXPECT_EQ(butterfly->report().send_bytes_per_s, 0) << "rank " << rank;
               }
             },
             options, {"a", "a", "b", "b", "c", "c"});
  }
}

// A long vector (many pipeline segments in every phase) over uneven zones, against an exact
// reference, in f32 and in bf16 (accumulated in f32). Segments of 256 KiB, not the default 2 MiB:
// the 3 MiB vector is cut as 24 MiB would be by default (4 segments a block in zone a), at an
// eighth of the bytes (TSan took 20 s over 24 MiB).
TEST(InprocCollectives, HierarchicalLongVectorOverUnevenZones) {
  constexpr size_t kCount = (size_t{3} << 20) / sizeof(float) + 13;
  Options options;
  options.algo = "hierarchical";
  options.chunk_bytes = 256 << 10;
  RunGroup(
      6,
      [&](int rank, Communicator& comm) {
        for (DType dtype : {DType::kF32, DType::kBF16}) {
          std::vector<uint8_t> data(kCount * DTypeSize(dtype));
          FillPattern(data.data(), kCount, dtype, rank, ReduceOp::kSum);
          Buffer b{data.data(), kCount, dtype};
          auto work = comm.AllReduce(b, b, ReduceOp::kSum);
          ASSERT_TRUE(work->Wait().ok());
          EXPECT_EQ(CountReductionMismatches(data.data(), kCount, dtype, 6, ReduceOp::kSum), 0u)
              << DTypeName(dtype);
          // Every rank reports the same phases, the lone rank of zone c too.
          ASSERT_EQ(work->report().phases.size(), 3u) << "rank " << rank;
          EXPECT_EQ(work->report().phases[2].first, "gather in zone");
        }
      },
      options, {"a", "a", "a", "b", "b", "c"});
}

// Auto all-reduces of one size class try each candidate twice, then all ranks run the same fastest
// one (a rank that chose otherwise would fail the argument check's plan fingerprint); every call's
// result is exact.
TEST(InprocCollectives, AutoTriesEachCandidateThenEveryRankRunsTheFastest) {
  constexpr size_t kCount = (size_t{1} << 20) + 5;
  RunGroup(
      4,
      [&](int rank, Communicator& comm) {
        std::vector<std::string> ran;
        for (int call = 0; call < 8; ++call) {
          std::vector<float> data(kCount);
          FillPattern(data.data(), kCount, DType::kF32, rank, ReduceOp::kSum);
          Buffer b{data.data(), kCount, DType::kF32};
          auto work = comm.AllReduce(b, b, ReduceOp::kSum);
          ASSERT_TRUE(work->Wait().ok());
          EXPECT_EQ(CountReductionMismatches(data.data(), kCount, DType::kF32, 4, ReduceOp::kSum),
                    0u);
          ran.push_back(work->report().algorithm);
          if (call < 6) {
            EXPECT_TRUE(absl::StrContains(work->report().plan, "trial")) << work->report().plan;
          } else {
            EXPECT_TRUE(absl::StrContains(work->report().plan, "fastest of its trials"))
                << work->report().plan;
          }
        }
        // The rules' choice first, then the other candidates, twice, then the fastest, kept.
        EXPECT_EQ(ran[0], "hierarchical");
        EXPECT_EQ(std::set<std::string>(ran.begin(), ran.begin() + 3),
                  (std::set<std::string>{"hierarchical", "butterfly", "ring"}));
        EXPECT_EQ(std::vector<std::string>(ran.begin(), ran.begin() + 3),
                  std::vector<std::string>(ran.begin() + 3, ran.begin() + 6));
        EXPECT_EQ(ran[6], ran[7]);
      },
      Options(), {"a", "a", "b", "b"});
}

TEST(InprocCollectives, ReduceScatterAllGatherBroadcastBarrier) {
  for (int n : {2, 3, 5}) {
    RunGroup(n, [&](int rank, Communicator& comm) {
      const size_t count = 1009;
      std::vector<float> in(count * n), block(count), gathered(count * n), bcast(count);
      FillPattern(in.data(), count * n, DType::kF32, rank, ReduceOp::kMax);
      ASSERT_TRUE(comm.ReduceScatter(Buffer{in.data(), count * n}, Buffer{block.data(), count},
                                     ReduceOp::kMax)
                      ->Wait()
                      .ok());
      EXPECT_EQ(CountReductionMismatches(block.data(), count, DType::kF32, n, ReduceOp::kMax,
                                         rank * count),
                0u);
      ASSERT_TRUE(comm.AllGather(Buffer{block.data(), count}, Buffer{gathered.data(), count * n})
                      ->Wait()
                      .ok());
      EXPECT_EQ(
          CountReductionMismatches(gathered.data(), count * n, DType::kF32, n, ReduceOp::kMax), 0u);
      FillPattern(bcast.data(), count, DType::kF32, rank, ReduceOp::kSum);
      ASSERT_TRUE(comm.Broadcast(Buffer{bcast.data(), count}, Buffer{bcast.data(), count}, n - 1)
                      ->Wait()
                      .ok());
      EXPECT_EQ(CountPatternMismatches(bcast.data(), count, DType::kF32, n - 1, ReduceOp::kSum),
                0u);
      EXPECT_TRUE(comm.Barrier()->Wait().ok());
    });
  }
}

TEST(InprocCollectives, SeveralCollectivesInFlightAtOnce) {
  Options options;
  options.workers = 4;
  RunGroup(
      3,
      [&](int rank, Communicator& comm) {
        constexpr int kCalls = 8;
        std::vector<std::vector<int64_t>> data(kCalls, std::vector<int64_t>(5000));
        std::vector<std::shared_ptr<Work>> works;
        for (int c = 0; c < kCalls; ++c) {
          for (size_t i = 0; i < data[c].size(); ++i)
            data[c][i] = (rank + 1) * (c + 1) * static_cast<int64_t>(i);
          Buffer b{data[c].data(), data[c].size(), DType::kI64};
          works.push_back(comm.AllReduce(b, b, ReduceOp::kSum));
        }
        for (int c = 0; c < kCalls; ++c) {
          ASSERT_TRUE(works[c]->Wait().ok());
          for (size_t i = 0; i < data[c].size(); ++i)
            ASSERT_EQ(data[c][i], 6 * (c + 1) * static_cast<int64_t>(i));
        }
      },
      options);
}

// What libtorch's futures build on: a callback runs once with the outcome, whether it was added
// before or after the collective completed, and sees the finished report.
TEST(InprocCollectives, OnDoneRunsOnceWithTheOutcome) {
  RunGroup(2, [&](int rank, Communicator& comm) {
    std::vector<float> data(100000, 1.0f + rank);
    Buffer b{data.data(), data.size(), DType::kF32};
    std::shared_ptr<Work> work = comm.AllReduce(b, b, ReduceOp::kSum);
    std::atomic<int> early_calls{0};
    std::atomic<uint64_t> early_bytes{0};
    work->OnDone([&](const absl::Status& s) {
      EXPECT_TRUE(s.ok()) << s;
      early_bytes = work->report().bytes_sent;
      ++early_calls;
    });
    ASSERT_TRUE(work->Wait().ok());
    int late_calls = 0;
    work->OnDone([&](const absl::Status& s) {
      EXPECT_TRUE(s.ok());
      ++late_calls;
    });
    EXPECT_EQ(late_calls, 1);  // Already done: ran at once, on this thread.
    // The early callback ran on the completing thread before or just after Wait returned.
    for (int i = 0; i < 1000 && early_calls.load() == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
    EXPECT_EQ(early_calls.load(), 1);
    EXPECT_GT(early_bytes.load(), 0u);
    EXPECT_EQ(data[7], 3.0f);
    // A failed call reports its error to the callback.
    std::vector<float> small(rank == 0 ? 10 : 11);
    Buffer mismatched{small.data(), small.size(), DType::kF32};
    std::shared_ptr<Work> failing = comm.AllReduce(mismatched, mismatched, ReduceOp::kSum);
    Notification failed;
    failing->OnDone([&](const absl::Status& s) {
      EXPECT_FALSE(s.ok());
      failed.Notify();
    });
    EXPECT_TRUE(failed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  });
}

TEST(InprocCollectives, LocalErrorsAreReportedOnEveryRank) {
  RunGroup(3, [&](int rank, Communicator& comm) {
    std::vector<float> a(10), b(10);
    // Rank 2 passes mismatched input and output types.
    Buffer in{a.data(), 10, DType::kF32};
    Buffer out{b.data(), 10, rank == 2 ? DType::kI32 : DType::kF32};
    absl::Status s = comm.AllReduce(in, out, ReduceOp::kSum)->Wait();
    ASSERT_TRUE(absl::IsInvalidArgument(s)) << s;
    if (rank == 2) {
      EXPECT_TRUE(absl::StrContains(s.message(), "input is float but output is int32")) << s;
    } else {
      EXPECT_TRUE(absl::StrContains(s.message(), "buffers (rank 0=ok, rank 1=ok, rank 2=invalid)"))
          << s;
    }
    EXPECT_TRUE(comm.health().ok());
  });
}

// rank·1000 + i mod 1000 at element i: their sums over ranks are exact in float.
std::vector<float> RankPattern(int rank, size_t count) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank * 1000 + i % 1000);
  return data;
}

// `data` holds the sum of RankPattern over `ranks` ranks (its first, a middle and its last
// element).
void ExpectSumOfRankPatterns(const std::vector<float>& data, int ranks) {
  for (size_t i : {size_t{0}, data.size() / 2 + 7, data.size() - 1}) {
    EXPECT_EQ(data[i], static_cast<float>(1000 * ranks * (ranks - 1) / 2 + ranks * (i % 1000)))
        << "element " << i;
  }
}

// Ranks forced to different algorithms refuse the call alike, naming each rank's algorithm by the
// registry's name, drop what the ring's ranks sent early, and the next call runs.
TEST(InprocCollectives, RanksOnDifferentAlgorithmsAreToldWhichRankRunsWhich) {
  std::vector<std::vector<LinkStats>> stats(3);
  RunGroup(3, [&](int rank, Communicator& comm) {
    CallOptions call;
    call.algo = rank == 1 ? "butterfly" : "ring";
    std::vector<float> data(1000, 1.0f);
    Buffer buffer{data.data(), data.size(), DType::kF32};
    absl::Status s = comm.AllReduce(buffer, buffer, ReduceOp::kSum, call)->Wait();
    ASSERT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(
        absl::StrContains(s.message(), "algorithm (rank 0=ring, rank 1=butterfly, rank 2=ring)"))
        << s;
    call.algo = "ring";
    ASSERT_TRUE(comm.AllReduce(buffer, buffer, ReduceOp::kSum, call)->Wait().ok());
    EXPECT_EQ(data[999], 3.0f);
    ASSERT_TRUE(comm.Barrier()->Wait().ok());
    stats[rank] = comm.link_stats();
  });
  ExpectEveryLinkDrained(stats);
}

// The one-shot's data leaves with the argument check: up to kMaxRideBytes in the descriptor's own
// message, the rest in one of its own; the ring's first step leaves with it to the next rank, in
// pipeline segments (4 KiB in RunGroup). Where the arguments differ, every rank refuses the call
// without touching its buffer and receives and drops what its peers sent early: nothing is left on
// a link (what each rank sent, its peer received), and the next call is right. The one-shot's
// counts: all of it rides; a rest on every rank; and a rest on rank 1 alone (the others' receives
// must hold its ride). The ring's: one segment each; several; and many more on rank 1.
// Halving-doubling's (rank 0 folds into rank 1, rank 2 halves with rank 1): too small to leave
// early; the fold and the first half early; and those where rank 1's count is larger.
struct MismatchedCounts {
  const char* algo;
  size_t others;
  size_t rank1;
};

void PrintTo(const MismatchedCounts& c, std::ostream* os) {
  *os << c.algo << " " << c.others << " against " << c.rank1;
}

class MismatchedEarlyData : public testing::TestWithParam<MismatchedCounts> {};

TEST_P(MismatchedEarlyData, IsDroppedAndTheGroupGoesOn) {
  constexpr int kRanks = 3;
  const MismatchedCounts counts = GetParam();
  std::vector<std::vector<LinkStats>> stats(kRanks);
  RunGroup(kRanks, [&](int rank, Communicator& comm) {
    CallOptions call;
    call.algo = counts.algo;
    std::vector<float> data(rank == 1 ? counts.rank1 : counts.others, 1.0f);
    Buffer buffer{data.data(), data.size(), DType::kF32};
    absl::Status s = comm.AllReduce(buffer, buffer, ReduceOp::kSum, call)->Wait();
    ASSERT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(
        absl::StrContains(s.message(), absl::StrFormat("count (rank 0=%d, rank 1=%d, rank 2=%d)",
                                                       counts.others, counts.rank1, counts.others)))
        << s;
    EXPECT_EQ(data[0], 1.0f);
    EXPECT_TRUE(comm.health().ok());
    std::vector<float> right(counts.others, rank + 1.0f);
    Buffer both{right.data(), right.size(), DType::kF32};
    ASSERT_TRUE(comm.AllReduce(both, both, ReduceOp::kSum, call)->Wait().ok());
    EXPECT_EQ(right.front(), 6.0f);
    EXPECT_EQ(right.back(), 6.0f);
    ASSERT_TRUE(comm.Barrier()->Wait().ok());
    stats[rank] = comm.link_stats();
  });
  ExpectEveryLinkDrained(stats);
}

INSTANTIATE_TEST_SUITE_P(EarlyAlgorithms, MismatchedEarlyData,
                         testing::Values(MismatchedCounts{"one_shot", 100, 99},
                                         MismatchedCounts{"one_shot", 40000, 39999},
                                         MismatchedCounts{"one_shot", 1000, 20000},
                                         MismatchedCounts{"ring", 100, 99},
                                         MismatchedCounts{"ring", 40000, 39999},
                                         MismatchedCounts{"ring", 1000, 400000},
                                         MismatchedCounts{"halving_doubling", 100, 99},
                                         MismatchedCounts{"halving_doubling", 4000, 3999},
                                         MismatchedCounts{"halving_doubling", 30000, 60000}),
                         [](const testing::TestParamInfo<MismatchedCounts>& info) {
                           return absl::StrFormat("%s_%d_against_%d", info.param.algo,
                                                  info.param.others, info.param.rank1);
                         });

// With rank 0 not yet in the call, rank `sender` has sent rank `receiver` its descriptor and
// `early_messages` messages of data, and nothing more: the rest needs the argument check's
// verdict, which needs rank 0. Then rank 0 calls, and every rank ends with the sum, in place,
// with every link drained.
void ExpectFirstMessagesLeaveWithTheCheck(const char* algo, size_t count, int sender, int receiver,
                                          uint64_t early_messages) {
  constexpr int kRanks = 3;
  std::atomic<bool> left_early{false};
  std::atomic<bool> sender_done_waiting{false};
  std::vector<std::vector<LinkStats>> stats(kRanks);
  RunGroup(kRanks, [&](int rank, Communicator& comm) {
    CallOptions call;
    call.algo = algo;
    std::vector<float> data = RankPattern(rank, count);
    Buffer buffer{data.data(), data.size(), DType::kF32};
    if (rank == 0) WaitFor(sender_done_waiting);
    const uint64_t before = comm.link_stats()[receiver].messages_sent;
    std::shared_ptr<Work> work = comm.AllReduce(buffer, buffer, ReduceOp::kSum, call);
    if (rank == sender) {
      left_early = SentExactly(comm, receiver, before + 1 + early_messages);
      sender_done_waiting = true;
    }
    ASSERT_TRUE(work->Wait().ok());
    ExpectSumOfRankPatterns(data, kRanks);
    ASSERT_TRUE(comm.Barrier()->Wait().ok());
    stats[rank] = comm.link_stats();
  });
  EXPECT_TRUE(left_early.load());
  ExpectEveryLinkDrained(stats);
}

// The ring's first step does not wait for the verdict: rank 1 sends rank 2 the first 1 MiB of its
// first step (256 segments of 4 KiB) of blocks of 1.33 MiB.
TEST(InprocCollectives, ARingsFirstStepLeavesWithTheArgumentCheck) {
  ExpectFirstMessagesLeaveWithTheCheck("ring", size_t{1} << 20, 1, 2, kMaxEarlyBytes / 4096);
}

// Nor does halving-doubling's first message: rank 2 (which does not fold) sends rank 1 its half of
// 40 KB, one message (rank 0's fold to rank 1 leaves early too).
TEST(InprocCollectives, HalvingDoublingsFirstMessageLeavesWithTheArgumentCheck) {
  ExpectFirstMessagesLeaveWithTheCheck("halving_doubling", 20000, 2, 1, 1);
}

// A vector that fits in the check's message costs one message per peer: the check's. A larger one
// costs two (the rest leaves early, in one message), and the results are the sums either way.
TEST(InprocCollectives, AOneShotSendsItsDataInTheArgumentChecksMessages) {
  constexpr int kRanks = 3;
  for (const size_t count : {size_t{256}, size_t{40000}}) {
    std::vector<uint64_t> sent(kRanks * kRanks);
    RunGroup(kRanks, [&](int rank, Communicator& comm) {
      CallOptions call;
      call.algo = "one_shot";
      std::vector<float> data = RankPattern(rank, count);
      Buffer buffer{data.data(), data.size(), DType::kF32};
      const std::vector<LinkStats> before = comm.link_stats();
      ASSERT_TRUE(comm.AllReduce(buffer, buffer, ReduceOp::kSum, call)->Wait().ok());
      const std::vector<LinkStats> after = comm.link_stats();
      for (int peer = 0; peer < kRanks; ++peer) {
        if (peer != rank) {
          sent[rank * kRanks + peer] = after[peer].messages_sent - before[peer].messages_sent;
        }
      }
      ExpectSumOfRankPatterns(data, kRanks);
    });
    for (int from = 0; from < kRanks; ++from) {
      for (int to = 0; to < kRanks; ++to) {
        if (from == to) continue;
        EXPECT_EQ(sent[from * kRanks + to], count * sizeof(float) <= kMaxRideBytes ? 1u : 2u)
            << count << " floats, rank " << from << " to rank " << to;
      }
    }
  }
}

// Forwarded (Bruck's all-gather): each rank sends ceil(log2 n) messages for a one-shot whose
// vector rides in them, whatever n; every rank ends with the sum, refuses a call whose counts
// differ alike (every rank's count named), sums a vector larger than the ride, and nothing is left
// on a link.
TEST(InprocCollectives, AForwardedCheckSendsLog2NMessagesAndEveryRankGetsEveryDescriptor) {
  for (const int n : {2, 3, 5, 8}) {
    SCOPED_TRACE(testing::Message() << n << " ranks");
    Options options;
    options.check_exchange = "forwarded";
    std::vector<std::vector<LinkStats>> stats(n);
    std::vector<uint64_t> sent(n);
    RunGroup(
        n,
        [&](int rank, Communicator& comm) {
          CallOptions call;
          call.algo = "one_shot";
          std::vector<float> data = RankPattern(rank, 256);
          Buffer buffer{data.data(), data.size(), DType::kF32};
          const std::vector<LinkStats> before = comm.link_stats();
          ASSERT_TRUE(comm.AllReduce(buffer, buffer, ReduceOp::kSum, call)->Wait().ok());
          const std::vector<LinkStats> after = comm.link_stats();
          for (int peer = 0; peer < n; ++peer) {
            sent[rank] += after[peer].messages_sent - before[peer].messages_sent;
          }
          ExpectSumOfRankPatterns(data, n);
          std::vector<float> odd(rank == n - 1 ? 99 : 100, 1.0f);
          Buffer odd_buffer{odd.data(), odd.size(), DType::kF32};
          const absl::Status s =
              comm.AllReduce(odd_buffer, odd_buffer, ReduceOp::kSum, call)->Wait();
          ASSERT_TRUE(absl::IsInvalidArgument(s)) << s;
          EXPECT_TRUE(absl::StrContains(
              s.message(), absl::StrFormat("rank 0=100, rank 1=%d", n == 2 ? 99 : 100)))
              << s;
          EXPECT_TRUE(absl::StrContains(s.message(), absl::StrFormat("rank %d=99)", n - 1))) << s;
          std::vector<float> large = RankPattern(rank, 40000);
          Buffer large_buffer{large.data(), large.size(), DType::kF32};
          ASSERT_TRUE(
              comm.AllReduce(large_buffer, large_buffer, ReduceOp::kSum, call)->Wait().ok());
          ExpectSumOfRankPatterns(large, n);
          ASSERT_TRUE(comm.Barrier()->Wait().ok());
          stats[rank] = comm.link_stats();
        },
        options);
    for (int rank = 0; rank < n; ++rank) {
      EXPECT_EQ(sent[rank], static_cast<uint64_t>(std::bit_width(static_cast<unsigned>(n - 1))))
          << "rank " << rank;
    }
    ExpectEveryLinkDrained(stats);
  }
}

// A forwarded check's message that does not hold the descriptors it announces (here 10 bytes
// where one descriptor belongs) fails the call with an error naming its sender: nothing is read
// past what arrived.
TEST(InprocCollectives, AForwardedCheckMessageWithoutItsDescriptorsFailsNamingTheSender) {
  auto fabric = std::make_shared<InprocFabric>();
  const std::vector<PeerAddress> peers = {{0, "", ""}, {1, "", ""}};
  InprocTransport transport0(fabric, 0), transport1(fabric, 1);
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> raw;
  std::thread connect([&] { raw = transport1.ConnectAll(1, peers, absl::InfiniteFuture()); });
  auto channels = transport0.ConnectAll(0, peers, absl::InfiniteFuture());
  connect.join();
  ASSERT_TRUE(channels.ok() && raw.ok());
  Options options;
  options.check_exchange = "forwarded";
  options.timeout = absl::Seconds(20);
  auto comm = Communicator::CreateFromChannels(0, *channels, options);
  const uint8_t garbage[10] = {};
  const uint64_t tag = MakeTag(EpochSequence(comm->epoch(), 1), Phase::kArgCheck, 0, 0);
  ASSERT_TRUE(
      (*raw)[0]->Send(tag, garbage, sizeof(garbage))->Wait(absl::Now() + absl::Seconds(20)).ok());
  std::vector<float> data(4, 1.0f);
  const absl::Status s =
      comm->AllReduce(Buffer{data.data(), 4}, Buffer{data.data(), 4}, ReduceOp::kSum)->Wait();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 1")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "10 bytes (step 0) does not hold the 1 descriptors"))
      << s;
}

TEST(InprocCollectives, DeadPeerFailsTheCallAndTheCommunicator) {
  auto fabric = std::make_shared<InprocFabric>();
  std::vector<PeerAddress> peers = {{0, "", ""}, {1, "", ""}, {2, "", ""}};
  Options options;
  options.timeout = absl::Seconds(60);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {  // Rank 2 never runs: it "died".
    threads.emplace_back([&, r] {
      InprocTransport transport(fabric, r);
      auto comm = Communicator::CreateFromChannels(
          r, *transport.ConnectAll(r, peers, absl::InfiniteFuture()), options);
      std::vector<float> data(100);
      auto work =
          comm->AllReduce(Buffer{data.data(), 100}, Buffer{data.data(), 100}, ReduceOp::kSum);
      if (r == 0) {
        absl::SleepFor(absl::Milliseconds(50));
        fabric->Kill(2, absl::UnavailableError("rank 2 was killed"));
      }
      absl::Status s = work->Wait();
      EXPECT_FALSE(s.ok());
      EXPECT_TRUE(absl::StrContains(s.message(), "rank 2")) << s;
      EXPECT_FALSE(comm->health().ok());
      EXPECT_FALSE(comm->Barrier()->Wait().ok());
    });
  }
  for (auto& t : threads) t.join();
}

TEST(InprocCollectives, DeadlineNamesThePeerItWaitedFor) {
  auto fabric = std::make_shared<InprocFabric>();
  std::vector<PeerAddress> peers = {{0, "", ""}, {1, "", ""}};
  Options options;
  options.check_args = false;
  InprocTransport transport(fabric, 0);
  auto comm = Communicator::CreateFromChannels(
      0, *transport.ConnectAll(0, peers, absl::InfiniteFuture()), options);
  std::vector<float> data(10);
  CallOptions call;
  call.timeout = absl::Milliseconds(200);
  absl::Status s =
      comm->AllReduce(Buffer{data.data(), 10}, Buffer{data.data(), 10}, ReduceOp::kSum, call)
          ->Wait();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "waiting for rank 1")) << s;
}

}  // namespace
}  // namespace hmc

namespace hmc {
namespace {

TEST(InprocPointToPoint, NthSendMatchesNthReceiveAndBadPeersAreRefused) {
  RunGroup(3, [&](int rank, Communicator& comm) {
    const int next = (rank + 1) % 3, prev = (rank + 2) % 3;
    std::vector<std::vector<int32_t>> out(4), in(4);
    std::vector<std::shared_ptr<Work>> works;
    for (int m = 0; m < 4; ++m) {
      out[m].assign(100 + m, rank * 1000 + m);
      in[m].assign(100 + m, -1);
      works.push_back(comm.Send(Buffer{out[m].data(), out[m].size(), DType::kI32}, next));
    }
    // Receives posted after the sends, in the same order: matched by position, not by size.
    for (int m = 0; m < 4; ++m) {
      works.push_back(comm.Recv(Buffer{in[m].data(), in[m].size(), DType::kI32}, prev));
    }
    for (auto& w : works) ASSERT_TRUE(w->Wait(absl::Now() + absl::Seconds(30)).ok());
    for (int m = 0; m < 4; ++m) {
      EXPECT_EQ(in[m], std::vector<int32_t>(100 + m, prev * 1000 + m));
    }
    int32_t x = 0;
    EXPECT_TRUE(absl::IsInvalidArgument(comm.Send(Buffer{&x, 1, DType::kI32}, rank)->Wait()));
    EXPECT_TRUE(absl::IsInvalidArgument(comm.Recv(Buffer{&x, 1, DType::kI32}, 3)->Wait()));
    EXPECT_TRUE(comm.Barrier()->Wait().ok());
  });
}

}  // namespace
}  // namespace hmc
