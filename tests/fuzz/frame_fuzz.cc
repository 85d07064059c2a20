// The frame layer: a stream of bytes from anyone, cut into frames by FrameParser (header checks,
// lengths before allocation, payload checksums), and each frame's payload parsed as every
// control message the protocols carry.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/coordinator_protocol.h"
#include "core/frame_io.h"
#include "core/peer_table.h"
#include "transports/tcp/cma.h"
#include "transports/tcp/handshake.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hmc;
  if (size == 0) return 0;
  // The first byte picks the parser's limit (before or after the handshake) and how the rest is
  // cut into reads, as recv would hand it over.
  FrameParser parser(data[0] & 1 ? kMaxHandshakePayloadBytes : kMaxControlPayloadBytes);
  const size_t chunk = 1 + (data[0] >> 1);
  std::span<const uint8_t> rest(data + 1, size - 1);
  while (!rest.empty()) {
    const size_t n = std::min(chunk, rest.size());
    parser.Feed(rest.first(n));
    rest = rest.subspan(n);
    for (;;) {
      absl::StatusOr<std::optional<Frame>> frame = parser.Next();
      if (!frame.ok()) return 0;  // The connection would close here.
      if (!frame->has_value()) break;
      const std::vector<uint8_t>& p = (*frame)->payload;
      JoinRequest::Parse(p).IgnoreError();
      Welcome::Parse(p).IgnoreError();
      KvMessage::Parse(p).IgnoreError();
      Suspicion::Parse(p).IgnoreError();
      PeerTable::Parse(p).IgnoreError();
      JoinedLinks::Parse(p).IgnoreError();
      PeerHello::Parse(p).IgnoreError();
      PullOffer::Parse(p).IgnoreError();
      ParseString(p).IgnoreError();
    }
  }
  return 0;
}
