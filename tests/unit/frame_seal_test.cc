// Frame seals on their own: what one side seals the other verifies, in order; a changed byte, a
// replayed, reordered or dropped frame, or another key fails.
#include "core/frame_seal.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hmc {
namespace {

const std::string kKey(32, 'k');

std::vector<uint8_t> Sealed(FrameSeal& seal, const std::vector<uint8_t>& frame) {
  std::vector<uint8_t> trailer(seal.trailer_bytes());
  seal.Begin();
  // In two parts, as frames arrive.
  seal.Update(std::span<const uint8_t>(frame.data(), frame.size() / 3));
  seal.Update(
      std::span<const uint8_t>(frame.data() + frame.size() / 3, frame.size() - frame.size() / 3));
  seal.Finish(trailer);
  return trailer;
}

bool Verifies(FrameSeal& seal, const std::vector<uint8_t>& frame,
              const std::vector<uint8_t>& trailer) {
  seal.Begin();
  seal.Update(frame);
  return seal.Verify(trailer);
}

TEST(FrameSeal, NamesParse) {
  for (FrameIntegrity i : {FrameIntegrity::kMac, FrameIntegrity::kCrc, FrameIntegrity::kOff}) {
    auto parsed = ParseFrameIntegrity(FrameIntegrityName(i));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, i);
  }
  EXPECT_FALSE(ParseFrameIntegrity("sha1").ok());
}

TEST(FrameSeal, MacVerifiesInOrderAndRefusesChangesReplaysAndOtherKeys) {
  FrameSeal sender(FrameIntegrity::kMac, kKey), receiver(FrameIntegrity::kMac, kKey);
  ASSERT_EQ(sender.trailer_bytes(), 16u);
  std::vector<std::vector<uint8_t>> frames, trailers;
  for (int i = 0; i < 4; ++i) {
    frames.push_back(std::vector<uint8_t>(1000 + i * 517, static_cast<uint8_t>(i)));
    trailers.push_back(Sealed(sender, frames.back()));
  }
  EXPECT_TRUE(Verifies(receiver, frames[0], trailers[0]));
  // Frame 1 replayed as frame 2 (or frame 2 where 1 belongs): the sequence number differs.
  EXPECT_FALSE(Verifies(receiver, frames[0], trailers[0]));
  FrameSeal fresh(FrameIntegrity::kMac, kKey);
  EXPECT_FALSE(Verifies(fresh, frames[1], trailers[1]));
  // One flipped bit anywhere.
  FrameSeal again(FrameIntegrity::kMac, kKey);
  std::vector<uint8_t> changed = frames[0];
  changed[777] ^= 1;
  EXPECT_FALSE(Verifies(again, changed, trailers[0]));
  // Another key: nothing verifies.
  FrameSeal stranger(FrameIntegrity::kMac, std::string(32, 'x'));
  EXPECT_FALSE(Verifies(stranger, frames[0], trailers[0]));
}

TEST(FrameSeal, CrcCatchesCorruptionAndOffSealsNothing) {
  FrameSeal sender(FrameIntegrity::kCrc, ""), receiver(FrameIntegrity::kCrc, "");
  ASSERT_EQ(sender.trailer_bytes(), 4u);
  std::vector<uint8_t> frame(5000, 9);
  const std::vector<uint8_t> trailer = Sealed(sender, frame);
  EXPECT_TRUE(Verifies(receiver, frame, trailer));
  frame[4999] ^= 0x80;
  EXPECT_FALSE(Verifies(receiver, frame, trailer));
  FrameSeal off(FrameIntegrity::kOff, "");
  EXPECT_EQ(off.trailer_bytes(), 0u);
}

}  // namespace
}  // namespace hmc
