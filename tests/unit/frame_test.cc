#include "core/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/frame_io.h"
#include "core/wire.h"

namespace hmc {
namespace {

std::vector<uint8_t> Header(const FrameHeader& h) {
  std::vector<uint8_t> bytes(kFrameHeaderBytes);
  EncodeFrameHeader(h, std::span<uint8_t, kFrameHeaderBytes>(bytes.data(), kFrameHeaderBytes));
  return bytes;
}

absl::StatusOr<FrameHeader> Decode(const std::vector<uint8_t>& bytes, uint64_t max = 1 << 20) {
  return DecodeFrameHeader(
      std::span<const uint8_t, kFrameHeaderBytes>(bytes.data(), kFrameHeaderBytes), max);
}

TEST(Frame, HeaderRoundTrips) {
  FrameHeader h;
  h.type = FrameType::kData;
  h.tag = 0x123456789abcdefull;
  h.epoch = 7;
  h.stripe = 2;
  h.stripes = 4;
  h.total_bytes = 4000;
  h.payload_bytes = 1000;
  auto decoded = Decode(Header(h));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->tag, h.tag);
  EXPECT_EQ(decoded->epoch, 7u);
  EXPECT_EQ(decoded->stripe, 2);
  EXPECT_EQ(decoded->stripes, 4);
  EXPECT_EQ(decoded->total_bytes, 4000u);
  EXPECT_EQ(decoded->payload_bytes, 1000u);
}

TEST(Frame, RejectsWrongMagic) {
  auto bytes = Header(FrameHeader{});
  bytes[0] ^= 0xff;
  auto decoded = Decode(bytes);
  ASSERT_FALSE(decoded.ok());
  EXPECT_TRUE(absl::StrContains(decoded.status().message(), "not an hmc frame"));
}

TEST(Frame, VersionMismatchNamesBothVersions) {
  auto bytes = Header(FrameHeader{});
  const uint16_t other = kProtocolVersion + 1;
  std::memcpy(bytes.data() + 4, &other, 2);
  auto decoded = Decode(bytes);
  ASSERT_FALSE(decoded.ok());
  EXPECT_TRUE(
      absl::StrContains(decoded.status().message(), absl::StrCat("peer speaks version ", other)));
  EXPECT_TRUE(absl::StrContains(decoded.status().message(),
                                absl::StrCat("this build speaks ", kProtocolVersion)));
}

TEST(Frame, RejectsCorruptedHeader) {
  FrameHeader h;
  h.payload_bytes = 10;
  h.total_bytes = 10;
  auto bytes = Header(h);
  bytes[20] ^= 1;  // Inside the tag.
  auto decoded = Decode(bytes);
  ASSERT_FALSE(decoded.ok());
  EXPECT_TRUE(absl::StrContains(decoded.status().message(), "checksum"));
}

TEST(Frame, RejectsOversizedLengthBeforeAllocating) {
  FrameHeader h;
  h.payload_bytes = uint64_t{1} << 40;
  h.total_bytes = h.payload_bytes;
  auto decoded = Decode(Header(h), 1 << 20);
  ASSERT_FALSE(decoded.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(decoded.status()));
  // Control frames are capped lower than data frames.
  h.type = FrameType::kJoin;
  h.payload_bytes = kMaxControlPayloadBytes + 1;
  h.total_bytes = h.payload_bytes;
  EXPECT_FALSE(Decode(Header(h), uint64_t{1} << 40).ok());
}

TEST(Frame, RejectsInconsistentStripes) {
  FrameHeader h;
  h.stripe = 4;
  h.stripes = 4;
  EXPECT_FALSE(Decode(Header(h)).ok());
  h.stripe = 0;
  h.payload_bytes = 10;
  h.total_bytes = 5;
  EXPECT_FALSE(Decode(Header(h)).ok());
}

TEST(FrameParser, ReassemblesFramesFedByteByByte) {
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5};
  std::vector<uint8_t> stream = EncodeControlFrame(FrameType::kKvPut, payload);
  const std::vector<uint8_t> second = EncodeControlFrame(FrameType::kHeartbeat, {});
  stream.insert(stream.end(), second.begin(), second.end());
  FrameParser parser;
  std::vector<Frame> frames;
  for (uint8_t byte : stream) {
    parser.Feed(std::span<const uint8_t>(&byte, 1));
    auto next = parser.Next();
    ASSERT_TRUE(next.ok()) << next.status();
    if (next->has_value()) frames.push_back(std::move(**next));
  }
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].header.type, FrameType::kKvPut);
  EXPECT_EQ(frames[0].payload, payload);
  EXPECT_EQ(frames[1].header.type, FrameType::kHeartbeat);
}

TEST(FrameParser, RejectsCorruptedControlPayload) {
  std::vector<uint8_t> stream =
      EncodeControlFrame(FrameType::kKvPut, std::vector<uint8_t>{1, 2, 3});
  stream.back() ^= 0x40;
  FrameParser parser;
  parser.Feed(stream);
  auto next = parser.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_TRUE(absl::StrContains(next.status().message(), "payload checksum"));
}

TEST(Wire, ReaderDetectsTruncation) {
  WireWriter w;
  w.Put<uint32_t>(5);
  w.PutString("hello");
  std::vector<uint8_t> bytes = w.bytes();
  WireReader ok(bytes);
  EXPECT_EQ(ok.Get<uint32_t>(), 5u);
  EXPECT_EQ(ok.GetString(), "hello");
  EXPECT_TRUE(ok.done());
  bytes.pop_back();
  WireReader truncated(bytes);
  truncated.Get<uint32_t>();
  truncated.GetString();
  EXPECT_FALSE(truncated.done());
}

}  // namespace
}  // namespace hmc
