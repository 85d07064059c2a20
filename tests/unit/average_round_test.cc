// Averaging rounds whose buffer comes in parts (Communicator::BeginAverage) over the inproc
// transport: the averages of the parts, what is compared across ranks, and misuse.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "tests/testing/inproc_group.h"

namespace hmc {
namespace {

double Value(int rank, int part, size_t i) { return std::sin(1.0 + rank * 7.0 + part * 3.0 + i); }
double Weight(int rank) { return 1.0 + rank; }

// A float part, a double part and a float part of other sizes: rank `rank`'s values.
struct Parts {
  std::vector<float> a;
  std::vector<double> b;
  std::vector<float> c;

  Parts(int rank, size_t a_count, size_t b_count, size_t c_count)
      : a(a_count), b(b_count), c(c_count) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(Value(rank, 0, i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = Value(rank, 1, i);
    for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(Value(rank, 2, i));
  }
  std::vector<Buffer> Buffers() {
    return {{a.data(), a.size(), DType::kF32},
            {b.data(), b.size(), DType::kF64},
            {c.data(), c.size(), DType::kF32}};
  }
};

// The weighted average of element i of part `part` over `ranks` ranks, in double.
double Expected(int ranks, int part, size_t i) {
  double sum = 0, weights = 0;
  for (int r = 0; r < ranks; ++r) {
    sum += Weight(r) * Value(r, part, i);
    weights += Weight(r);
  }
  return sum / weights;
}

TEST(AverageRound, PartsAreAveragedAsOneRoundAndWrittenOnlyOnCommit) {
  constexpr int kRanks = 3;
  std::vector<Parts> results(kRanks, Parts(0, 0, 0, 0));
  std::vector<AverageOutcome> outcomes(kRanks);
  RunGroup(kRanks, [&](int rank, Communicator& comm) {
    Parts parts(rank, 5000, 1 << 14, 3);
    const Parts original = parts;
    absl::StatusOr<std::unique_ptr<AverageRound>> round = comm.BeginAverage(Weight(rank));
    ASSERT_TRUE(round.ok()) << round.status();
    const std::vector<Buffer> buffers = parts.Buffers();
    for (size_t k = 0; k < buffers.size(); ++k) {
      ASSERT_TRUE((*round)->Add(buffers[k], k + 1 == buffers.size()).ok());
      // Backward goes on between parts; the parts are left alone until the commit.
      absl::SleepFor(absl::Milliseconds(20));
      EXPECT_EQ(parts.a, original.a);
      EXPECT_EQ(parts.b, original.b);
    }
    absl::StatusOr<AverageOutcome> outcome = (*round)->Finish();
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    outcomes[rank] = *outcome;
    results[rank] = parts;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(outcomes[r].round, 0u);
    EXPECT_EQ(outcomes[r].contributors, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(outcomes[r].total_weight, Weight(0) + Weight(1) + Weight(2));
    // Bit-identical on every rank.
    EXPECT_EQ(results[r].a, results[0].a);
    EXPECT_EQ(results[r].b, results[0].b);
    EXPECT_EQ(results[r].c, results[0].c);
  }
  const Parts& got = results[0];
  for (size_t i = 0; i < got.a.size(); ++i) ASSERT_NEAR(got.a[i], Expected(kRanks, 0, i), 1e-6);
  for (size_t i = 0; i < got.b.size(); ++i) ASSERT_NEAR(got.b[i], Expected(kRanks, 1, i), 1e-12);
  for (size_t i = 0; i < got.c.size(); ++i) ASSERT_NEAR(got.c[i], Expected(kRanks, 2, i), 1e-6);
}

// Parts of different sizes fail on every rank, the caller's buffers as they were, whatever the
// plan: the tuner's, and the one-shot and the ring, whose first messages left with the argument
// check (part b: 20 000 doubles, more than rides in the check's message) and are dropped, every
// link drained. The next round commits.
class PartsOfDifferentSizes : public testing::TestWithParam<const char*> {};

TEST_P(PartsOfDifferentSizes, FailOnEveryRankAndLeaveTheBuffersAsTheyWere) {
  constexpr int kRanks = 3;
  std::vector<std::string> errors(kRanks);
  std::vector<std::vector<LinkStats>> stats(kRanks);
  RunGroup(kRanks, [&](int rank, Communicator& comm) {
    Parts parts(rank, 100, rank == 1 ? 20001 : 20000, 7);
    const Parts original = parts;
    const CallOptions call{.algo = GetParam()};
    absl::StatusOr<std::unique_ptr<AverageRound>> round = comm.BeginAverage(Weight(rank), call);
    ASSERT_TRUE(round.ok());
    const std::vector<Buffer> buffers = parts.Buffers();
    for (size_t k = 0; k < buffers.size(); ++k) {
      ASSERT_TRUE((*round)->Add(buffers[k], k + 1 == buffers.size()).ok());
    }
    absl::StatusOr<AverageOutcome> outcome = (*round)->Finish();
    ASSERT_FALSE(outcome.ok());
    errors[rank] = std::string(outcome.status().message());
    EXPECT_EQ(parts.a, original.a);
    EXPECT_EQ(parts.b, original.b);
    EXPECT_EQ(parts.c, original.c);
    // The communicator goes on: the next round commits, as round 0 (nothing was committed).
    std::vector<float> value = {static_cast<float>(rank)};
    absl::StatusOr<AverageOutcome> next = comm.Average({value.data(), 1, DType::kF32}, 1.0, call);
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(next->round, 0u);
    EXPECT_EQ(value[0], 1.0f);
    ASSERT_TRUE(comm.Barrier()->Wait().ok());
    stats[rank] = comm.link_stats();
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NE(errors[r].find("count (rank 0=20000, rank 1=20001, rank 2=20000)"), std::string::npos)
        << errors[r];
  }
  ExpectEveryLinkDrained(stats);
}

INSTANTIATE_TEST_SUITE_P(Plans, PartsOfDifferentSizes, testing::Values("", "one_shot", "ring"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(*info.param == 0 ? "auto" : info.param);
                         });

// A part's data does not wait for the argument check's verdict: its weighted copy is fixed once
// the part is added. With rank 0 not yet in the round, rank 2's first part (a one-shot of 40 000
// floats) has sent rank 1 its descriptor with the first 64 KiB and one message of the rest, and
// nothing more. Then rank 0 adds its parts and every rank commits the averages.
TEST(AverageRound, APartsDataLeavesWithTheArgumentCheck) {
  constexpr int kRanks = 3;
  constexpr int kSender = 2;
  constexpr int kReceiver = 1;
  std::atomic<bool> left_early{false};
  std::atomic<bool> sender_done_waiting{false};
  std::vector<Parts> results(kRanks, Parts(0, 0, 0, 0));
  RunGroup(kRanks, [&](int rank, Communicator& comm) {
    Parts parts(rank, 40000, 1000, 0);
    if (rank == 0) WaitFor(sender_done_waiting);
    const CallOptions call{.algo = "one_shot"};
    absl::StatusOr<std::unique_ptr<AverageRound>> round = comm.BeginAverage(Weight(rank), call);
    ASSERT_TRUE(round.ok());
    const std::vector<Buffer> buffers = parts.Buffers();
    const uint64_t before = comm.link_stats()[kReceiver].messages_sent;
    ASSERT_TRUE((*round)->Add(buffers[0], /*last=*/false).ok());
    if (rank == kSender) {
      left_early = SentExactly(comm, kReceiver, before + 2);  // The descriptor, one rest.
      sender_done_waiting = true;
    }
    ASSERT_TRUE((*round)->Add(buffers[1], /*last=*/true).ok());
    absl::StatusOr<AverageOutcome> outcome = (*round)->Finish();
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    results[rank] = parts;
  });
  EXPECT_TRUE(left_early.load());
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(results[r].a, results[0].a);
    EXPECT_EQ(results[r].b, results[0].b);
  }
  const Parts& got = results[0];
  for (size_t i = 0; i < got.a.size(); ++i) ASSERT_NEAR(got.a[i], Expected(kRanks, 0, i), 1e-6);
  for (size_t i = 0; i < got.b.size(); ++i) ASSERT_NEAR(got.b[i], Expected(kRanks, 1, i), 1e-12);
}

TEST(AverageRound, RanksThatDisagreeOnTheLastPartAreToldOnEveryRank) {
  constexpr int kRanks = 3;
  std::vector<std::string> errors(kRanks);
  RunGroup(kRanks, [&](int rank, Communicator& comm) {
    Parts parts(rank, 100, 50, 7);
    const std::vector<Buffer> buffers = parts.Buffers();
    // The ranks with a second part wait this long for rank 0's.
    const CallOptions call{.timeout = absl::Seconds(2)};
    absl::StatusOr<std::unique_ptr<AverageRound>> round = comm.BeginAverage(1.0, call);
    ASSERT_TRUE(round.ok());
    // Rank 0 ends the round after its first part, the others after their second.
    ASSERT_TRUE((*round)->Add(buffers[0], rank == 0).ok());
    if (rank != 0) {
      ASSERT_TRUE((*round)->Add(buffers[1], true).ok());
    }
    absl::StatusOr<AverageOutcome> outcome = (*round)->Finish();
    ASSERT_FALSE(outcome.ok());
    errors[rank] = std::string(outcome.status().message());
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NE(errors[r].find("last part of the averaging round (rank 0=yes, rank 1=no, rank 2=no)"),
              std::string::npos)
        << errors[r];
  }
}

TEST(AverageRound, MisuseIsRefused) {
  RunGroup(1, [&](int, Communicator& comm) {
    std::vector<float> values(4, 1.0f);
    const Buffer buffer{values.data(), values.size(), DType::kF32};
    EXPECT_TRUE(absl::IsInvalidArgument(comm.BeginAverage(-1.0).status()));
    absl::StatusOr<std::unique_ptr<AverageRound>> round = comm.BeginAverage(1.0);
    ASSERT_TRUE(round.ok());
    // One round at a time.
    EXPECT_TRUE(absl::IsFailedPrecondition(comm.BeginAverage(1.0).status()));
    std::vector<int32_t> ints(4);
    EXPECT_TRUE(absl::IsInvalidArgument((*round)->Add({ints.data(), 4, DType::kI32}, false)));
    ASSERT_TRUE((*round)->Add(buffer, false).ok());
    EXPECT_TRUE(absl::IsFailedPrecondition((*round)->Finish().status()));
    ASSERT_TRUE((*round)->Add(buffer, true).ok());
    EXPECT_TRUE(absl::IsFailedPrecondition((*round)->Add(buffer, true)));
    ASSERT_TRUE((*round)->Finish().ok());
    EXPECT_TRUE(absl::IsFailedPrecondition((*round)->Finish().status()));
    // A round dropped unfinished lets the next one begin.
    round->reset();
    absl::StatusOr<std::unique_ptr<AverageRound>> dropped = comm.BeginAverage(1.0);
    ASSERT_TRUE(dropped.ok());
    ASSERT_TRUE((*dropped)->Add(buffer, false).ok());
    dropped->reset();
    EXPECT_TRUE(comm.Average(buffer, 1.0).ok());
  });
}

}  // namespace
}  // namespace hmc
