// hmc-fuzz-seeds DIR: writes the seed inputs of the frame, coordinator and channel targets under
// DIR/TARGET/, built with the real encoders, so that fuzzing starts from well-formed sessions.
// (The inventory and topology targets' seeds are copies of the repository's own files, committed
// under tests/fuzz/corpus.)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "collectives/codecs/codec.h"
#include "core/coordinator_protocol.h"
#include "core/frame_io.h"
#include "core/peer_table.h"
#include "transports/tcp/cma.h"
#include "transports/tcp/handshake.h"

namespace {

using Bytes = std::vector<uint8_t>;

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes Control(hmc::FrameType type, const Bytes& payload, uint32_t epoch = 0, uint64_t tag = 0) {
  return hmc::EncodeControlFrame(type, payload, epoch, tag);
}

// A data-stream frame of the channel: a stripe, or an offer or answer carried like one.
Bytes DataFrame(hmc::FrameType type, uint64_t tag, uint64_t total, uint16_t stripes,
                uint16_t stripe, const Bytes& payload, bool checksum) {
  hmc::FrameHeader h;
  h.type = type;
  h.flags = checksum ? hmc::kFlagPayloadChecksum : 0;
  h.tag = tag;
  h.epoch = 1;
  h.total_bytes = total;
  h.stripes = stripes;
  h.stripe = stripe;
  h.payload_bytes = payload.size();
  h.payload_crc = checksum ? hmc::Checksum(payload) : 0;
  Bytes bytes(hmc::kFrameHeaderBytes);
  hmc::EncodeFrameHeader(
      h, std::span<uint8_t, hmc::kFrameHeaderBytes>(bytes.data(), hmc::kFrameHeaderBytes));
  return bytes + payload;
}

void Write(const std::filesystem::path& dir, const std::string& name, const Bytes& bytes) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hmc;
  if (argc != 2) {
    std::fprintf(stderr, "usage: hmc-fuzz-seeds DIR\n");
    return 2;
  }
  const std::filesystem::path root = argv[1];
  JoinRequest join;
  join.world_id = "hmc";
  join.address = "127.0.0.1:1";
  join.zone = "z";
  join.nonce = std::string(32, 'n');
  join.proof = std::string(32, 'p');
  join.members = {0, 1};
  const Bytes put =
      Control(FrameType::kKvPut, KvMessage{.request = 1, .key = "k", .value = "v"}.Serialize());
  const Bytes get =
      Control(FrameType::kKvGet, KvMessage{.request = 2, .key = "k", .wait_ms = 10}.Serialize());
  const Bytes suspect = Control(FrameType::kSuspect, Suspicion{0, 1, "gone"}.Serialize());
  const Bytes ready = Control(FrameType::kJoinReady, JoinedLinks{}.Serialize());
  const Bytes heartbeat = Control(FrameType::kHeartbeat, {});
  const Bytes leave = Control(FrameType::kLeave, {});
  PeerTable table;
  table.epoch = 1;
  table.world_size = 1;
  table.peers.resize(1);
  PeerHello hello;
  hello.world_id = "hmc";
  hello.nonce = std::string(32, 'n');
  hello.proof = std::string(32, 'p');

  // frame_fuzz: a first byte (limit and read size), then frames.
  const Bytes frames = put + get + Control(FrameType::kJoin, join.Serialize()) +
                       Control(FrameType::kPeerTable, table.Serialize()) +
                       Control(FrameType::kPeerHello, hello.Serialize());
  Write(root / "frame_fuzz", "frames", Bytes{0x20} + frames);
  Write(root / "frame_fuzz", "frames_small_reads", Bytes{0x01} + frames);

  // coordinator_fuzz: 1 then a joined rank's frames; 0 then a stranger's.
  Write(root / "coordinator_fuzz", "joined", Bytes{1} + put + get + heartbeat + suspect + leave);
  Write(root / "coordinator_fuzz", "joined_ready", Bytes{1} + ready);
  Write(root / "coordinator_fuzz", "stranger",
        Bytes{0} + Control(FrameType::kJoin, join.Serialize()));

  // channel_fuzz: three receive sizes (x97 bytes), then the data stream.
  const Bytes small(97, 7), large(97 * 80, 9);
  Write(root / "channel_fuzz", "one_stripe",
        Bytes{1, 80, 200} + DataFrame(FrameType::kData, 0, 97, 1, 0, small, false) +
            DataFrame(FrameType::kData, 1, large.size(), 1, 0, large, false));
  Write(root / "channel_fuzz", "two_stripes",
        Bytes{1, 80, 200} +
            DataFrame(FrameType::kData, 1, large.size(), 2, 0,
                      Bytes(large.begin(), large.begin() + 4096), false) +
            DataFrame(FrameType::kData, 1, large.size(), 2, 1,
                      Bytes(large.begin() + 4096, large.end()), false));
  Write(root / "channel_fuzz", "streams_wanted",
        Bytes{1, 80, 200} + DataFrame(FrameType::kStreamsWanted, 0, 2, 1, 0, Bytes{1, 1}, true) +
            DataFrame(FrameType::kData, 1, large.size(), 1, 0, large, false));
  Write(root / "channel_fuzz", "stream_hold",
        Bytes{1, 80, 200} + DataFrame(FrameType::kStreamHold, 0, 2, 1, 0, Bytes{0, 1}, true) +
            DataFrame(FrameType::kStreamHold, 0, 2, 1, 0, Bytes{0, 0}, true) +
            DataFrame(FrameType::kData, 1, large.size(), 1, 0, large, false));
  PullOffer offer{4096, large.size(), 8192};
  offer.identity.fill('i');
  Write(root / "channel_fuzz", "offer_and_close",
        Bytes{1, 80, 200} +
            DataFrame(FrameType::kRendezvous, 1, large.size(), 1, 0, offer.Serialize(), true) +
            DataFrame(FrameType::kLeave, 0, 4, 1, 0, Bytes{'b', 'y', 'e', '!'}, true));
  // codec_fuzz: codec index, count byte (count = 7 * byte + 1), then an encoding of that many.
  const std::vector<std::string> specs = DefaultCodecSpecs();
  for (size_t i = 0; i < specs.size(); ++i) {
    std::unique_ptr<Codec> codec = *MakeCodec(specs[i]);
    std::vector<float> values(64);
    for (size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>(k % 9) - 3.5f;
    Bytes encoded(codec->MaxEncodedBytes(values.size()));
    encoded.resize(codec->Encode(values.data(), values.size(), encoded.data()));
    Write(root / "codec_fuzz", specs[i], Bytes{static_cast<uint8_t>(i), 9} + encoded);
  }
  return 0;
}
