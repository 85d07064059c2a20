// State download (state_transfer.h) between threads over the inproc transport: a stale member gets
// the holders' tensors bit for bit, striped over them (several stale members at once too); parts it
// holds already are not sent again (how a cut-short download resumes); holders that disagree fail
// the download, naming one.
#include "collectives/state_transfer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "transports/inproc/inproc_transport.h"

namespace hmc {
namespace {

// One member's tensors: 300k floats, 1000 doubles and a step counter.
struct Tensors {
  std::vector<float> weights = std::vector<float>(300000);
  std::vector<double> moments = std::vector<double>(1000);
  int64_t step = 0;

  explicit Tensors(int seed) {
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>(i % 977) * seed;
    for (size_t i = 0; i < moments.size(); ++i) moments[i] = 0.5 * static_cast<double>(i) + seed;
    step = 1000 + seed;
  }
  SharedState State() {
    return SharedState{{{"weights", Buffer{weights.data(), weights.size(), DType::kF32}},
                        {"moments", Buffer{moments.data(), moments.size(), DType::kF64}},
                        {"step", Buffer{&step, 1, DType::kI64}}}};
  }
  bool operator==(const Tensors& o) const {
    return weights == o.weights && moments == o.moments && step == o.step;
  }
};

// Runs TransferState on `tensors.size()` threads; returns each member's status and download.
std::vector<std::pair<absl::Status, StateDownload>> Transfer(std::vector<Tensors>& tensors,
                                                             const std::vector<uint8_t>& stale,
                                                             absl::Duration timeout,
                                                             bool resume = false) {
  const int n = static_cast<int>(tensors.size());
  auto fabric = std::make_shared<InprocFabric>();
  std::vector<PeerAddress> peers;
  for (int r = 0; r < n; ++r) peers.push_back(PeerAddress{r, "", absl::StrCat("rank ", r)});
  std::vector<std::pair<absl::Status, StateDownload>> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      InprocTransport transport(fabric, r);
      auto channels = transport.ConnectAll(r, peers, absl::InfiniteFuture());
      ASSERT_TRUE(channels.ok());
      ScratchPool pool;
      CollectiveContext ctx(r, n, &*channels, 1, "state transfer", absl::Now() + timeout, 4096,
                            &pool);
      const SharedState state = tensors[r].State();
      results[r].first = TransferState(ctx, stale, state, resume, &results[r].second);
      ctx.Drain();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(StateTransfer, StaleMemberGetsTheStateStripedOverTheHolders) {
  std::vector<Tensors> tensors = {Tensors(1), Tensors(1), Tensors(1), Tensors(7)};
  ASSERT_FALSE(tensors[3] == tensors[0]);
  auto results = Transfer(tensors, {0, 0, 0, 1}, absl::Seconds(30));
  for (const auto& [status, download] : results) EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(tensors[3] == tensors[0]);
  const StateDownload& d = results[3].second;
  EXPECT_EQ(d.parts_downloaded, d.parts);
  EXPECT_EQ(d.bytes, tensors[0].State().bytes());
  EXPECT_EQ(d.sources, (std::vector<int>{0, 1, 2}));
}

TEST(StateTransfer, TwoStaleMembersAreServedTogether) {
  std::vector<Tensors> tensors = {Tensors(4), Tensors(9), Tensors(4), Tensors(4), Tensors(8)};
  auto results = Transfer(tensors, {0, 1, 0, 0, 1}, absl::Seconds(30));
  for (const auto& [status, download] : results) EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(tensors[1] == tensors[0]);
  EXPECT_TRUE(tensors[4] == tensors[0]);
  EXPECT_EQ(results[1].second.bytes, tensors[0].State().bytes());
  EXPECT_EQ(results[4].second.bytes, tensors[0].State().bytes());
}

TEST(StateTransfer, PartsAlreadyHeldAreNotSentAgain) {
  std::vector<Tensors> tensors = {Tensors(2), Tensors(2), Tensors(2)};
  tensors[2].moments[10] = -1;  // Only this part differs, as after a download cut short.
  auto results = Transfer(tensors, {0, 0, 1}, absl::Seconds(30), /*resume=*/true);
  for (const auto& [status, download] : results) EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(tensors[2] == tensors[0]);
  const StateDownload& d = results[2].second;
  EXPECT_GT(d.parts, 2);
  EXPECT_EQ(d.parts_downloaded, 1);
  EXPECT_EQ(d.bytes, tensors[0].moments.size() * sizeof(double));
  EXPECT_EQ(d.sources.size(), 1u);
}

TEST(StateTransfer, HoldersThatDisagreeFailTheDownloadAndNameOne) {
  std::vector<Tensors> tensors = {Tensors(3), Tensors(3), Tensors(5)};
  tensors[1].weights[123456] += 1;
  auto results = Transfer(tensors, {0, 0, 1}, absl::Seconds(30));
  EXPECT_TRUE(results[0].first.ok()) << results[0].first;
  EXPECT_TRUE(results[1].first.ok()) << results[1].first;
  const absl::Status& s = results[2].first;
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "members hold different state")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "tensor 'weights'")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 1")) << s;
}

TEST(StateTransfer, NobodyStaleOrEverybodyStaleMovesNothing) {
  std::vector<Tensors> tensors = {Tensors(1), Tensors(2)};
  for (const std::vector<uint8_t>& stale : {std::vector<uint8_t>{0, 0}, {1, 1}}) {
    auto results = Transfer(tensors, stale, absl::Seconds(5));
    for (const auto& [status, download] : results) {
      EXPECT_TRUE(status.ok()) << status;
      EXPECT_EQ(download.bytes, 0u);
    }
  }
  EXPECT_FALSE(tensors[0] == tensors[1]);
}

TEST(StateTransfer, FingerprintCoversNamesTypesAndSizesNotValues) {
  Tensors a(1), b(2);
  EXPECT_EQ(a.State().Fingerprint(), b.State().Fingerprint());
  b.moments.resize(999);
  EXPECT_NE(a.State().Fingerprint(), b.State().Fingerprint());
  SharedState renamed = a.State();
  renamed.tensors[0].first = "weight";
  EXPECT_NE(renamed.Fingerprint(), a.State().Fingerprint());
  EXPECT_EQ(SharedState{}.Fingerprint(), 0u);
}

}  // namespace
}  // namespace hmc
