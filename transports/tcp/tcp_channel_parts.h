#ifndef HMC_TRANSPORTS_TCP_TCP_CHANNEL_PARTS_H_
#define HMC_TRANSPORTS_TCP_TCP_CHANNEL_PARTS_H_

// What a TcpChannel is made of: its send operations, outgoing frames, incoming messages and
// streams. Only the files that implement TcpChannel include this.

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/frame.h"
#include "core/frame_seal.h"
#include "core/socket.h"
#include "core/stream_io.h"
#include "transports/tcp/tcp_channel.h"
#include "transports/tcp/tcp_loop.h"

namespace hmc {

struct TcpChannel::SendOp {
  RequestPtr request;
  int stripes_left = 0;
  absl::Status outcome;  // What the request completes with once its last stripe is written.
};

struct TcpChannel::OutFrame {
  uint8_t header[kFrameHeaderBytes];
  uint64_t tag = 0;
  bool abandonable = false;  // A data stripe or a rendezvous offer: DiscardTagsBelow may drop it.
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;    // Payload bytes.
  int spread = 1;        // A data stripe: the streams its message is spread over (the first ones).
  uint64_t written = 0;  // Header, payload and trailer bytes written so far.
  bool sealed = false;   // Committed to its stream's sequence: it must go out.
  uint8_t trailer[kMaxSealBytes];
  std::shared_ptr<SendOp> op;  // Null for control frames.
  std::vector<uint8_t> owned;  // A control frame's payload (data points into it).
};

// A message being received: posted by Recv, or arrived first ("unexpected") into own storage.
struct TcpChannel::Incoming {
  uint64_t total = 0;
  bool up_to = false;        // Posted by RecvUpTo: `total` is a capacity until a length arrives.
  uint16_t stripes = 0;      // 0 until the first stripe header arrives.
  uint64_t stripe_mask = 0;  // Stripes whose header arrived.
  uint16_t stripes_done = 0;
  absl::Time first_byte;         // When the first stripe's header arrived.
  uint8_t* user = nullptr;       // Posted receive buffer.
  RequestPtr request;            // Null while nobody posted a receive.
  std::vector<uint8_t> storage;  // Unexpected arrival.
  uint8_t* dest() { return storage.empty() && total > 0 && user ? user : storage.data(); }
};

struct TcpChannel::Stream {
  int index = 0;
  UniqueFd fd;
  std::unique_ptr<StreamIo> io;
  bool ready = false;  // Its TLS handshake (if any) finished.
  std::unique_ptr<FrameSeal> send_seal;
  std::unique_ptr<FrameSeal> receive_seal;
  size_t trailer_bytes = 0;  // After every frame's payload, both ways.
  uint8_t trailer[kMaxSealBytes];
  size_t trailer_got = 0;
  TcpLoop::Target target;
  std::deque<OutFrame> queue;
  uint32_t interest = 0;
  // Receive state: a header being read, or a payload going to `dest`.
  uint8_t header_bytes[kFrameHeaderBytes];
  size_t header_got = 0;
  bool have_header = false;
  FrameHeader header;
  uint8_t* dest = nullptr;
  uint64_t remaining = 0;
  bool paused = false;           // A header waits for memory or a posted receive.
  bool hold_told = false;        // The peer was told this side stopped reading (TellHold).
  bool said_goodbye = false;     // This side queued its goodbye: nothing is sent after it.
  bool wrote_end = false;        // The goodbye left and writing is shut down (SHUT_WR).
  bool got_goodbye = false;      // The peer said goodbye.
  std::vector<uint8_t> control;  // The payload of a control frame being read.
  bool eof = false;
  bool discarding = false;     // The payload being read belongs to an abandoned tag.
  bool local = false;          // A Unix domain socket.
  int unsent_bound = 0;        // TCP_NOTSENT_LOWAT as last set; 0: not set.
  uint64_t pacing = kUnpaced;  // SO_MAX_PACING_RATE as last set, bytes/s.
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_TCP_CHANNEL_PARTS_H_
