// How a rank's sending rate is shared among the links a phase sends on at once, and how a
// collective's context hands the parts to its channels (global ranks, subgroup views).
#include "collectives/send_pacing.h"

#include <gtest/gtest.h>

#include "collectives/collective_context.h"

namespace hmc {
namespace {

TEST(PacingRates, EachLinkGetsAPartInProportionToItsBytes) {
  EXPECT_EQ(PacingRates(1000, {0, 300, 100}), (std::vector<uint64_t>{0, 750, 250}));
  EXPECT_EQ(PacingRates(900, {100, 100, 100}), (std::vector<uint64_t>{300, 300, 300}));
}

TEST(PacingRates, NothingIsPacedWithoutARateOrWithOneLink) {
  EXPECT_EQ(PacingRates(0, {0, 300, 100}), (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(PacingRates(1000, {0, 300, 0}), (std::vector<uint64_t>{0, 0, 0}));
}

// A link that only records the pacing rates it was given.
class RecordingChannel final : public Channel {
 public:
  explicit RecordingChannel(int peer) : peer_(peer), name_("rank " + std::to_string(peer)) {}
  int peer_rank() const override { return peer_; }
  const std::string& peer_description() const override { return name_; }
  RequestPtr Send(uint64_t, const void*, size_t) override { return nullptr; }
  RequestPtr Recv(uint64_t, void*, size_t) override { return nullptr; }
  RequestPtr RecvUpTo(uint64_t, void*, size_t) override { return nullptr; }
  void Close(const absl::Status&) override {}
  void DiscardTagsBelow(uint64_t, const absl::Status&) override {}
  absl::Status status() const override { return absl::OkStatus(); }
  LinkStats stats() const override { return {}; }
  void SetPacingRate(uint64_t bytes_per_s) override { rates.push_back(bytes_per_s); }

  std::vector<uint64_t> rates;

 private:
  const int peer_;
  const std::string name_;
};

struct FourRanks {
  FourRanks() {
    for (int r = 0; r < 4; ++r) {
      recording.push_back(r == 1 ? nullptr : std::make_shared<RecordingChannel>(r));
      channels.push_back(recording.back());
    }
  }
  std::vector<std::shared_ptr<RecordingChannel>> recording;
  std::vector<std::shared_ptr<Channel>> channels;
  ScratchPool pool;
};

TEST(SendPacing, ASubgroupPacesTheLinksToItsMembersWhileItsSendsLast) {
  FourRanks ranks;
  CollectiveContext ctx(1, 4, &ranks.channels, 1, "test", absl::InfiniteFuture(), 1 << 20,
                        &ranks.pool);
  ctx.EnablePacing(0);
  ctx.NoteSendRate(400);
  ctx.NoteSendRate(800);  // The highest rate seen counts.
  ctx.NoteSendRate(500);
  CollectiveContext view(ctx, {0, 1, 3}, 0);  // This rank is member 1 of the view.
  {
    const SendPacing pacing = view.PaceSends({100, 0, 300});
    EXPECT_EQ(ranks.recording[0]->rates, (std::vector<uint64_t>{200}));
    EXPECT_EQ(ranks.recording[3]->rates, (std::vector<uint64_t>{600}));
  }
  EXPECT_EQ(ranks.recording[0]->rates, (std::vector<uint64_t>{200, 0}));
  EXPECT_EQ(ranks.recording[3]->rates, (std::vector<uint64_t>{600, 0}));
  EXPECT_TRUE(ranks.recording[2]->rates.empty());
}

TEST(SendPacing, NothingIsPacedUnlessEnabled) {
  FourRanks ranks;
  CollectiveContext ctx(1, 4, &ranks.channels, 1, "test", absl::InfiniteFuture(), 1 << 20,
                        &ranks.pool);
  ctx.NoteSendRate(800);
  EXPECT_EQ(ctx.send_bytes_per_s(), 0);
  const SendPacing pacing = ctx.PaceSends({100, 0, 100, 100});
  for (int r : {0, 2, 3}) EXPECT_TRUE(ranks.recording[r]->rates.empty()) << r;
}

}  // namespace
}  // namespace hmc
