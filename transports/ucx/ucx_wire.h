#ifndef HMC_TRANSPORTS_UCX_UCX_WIRE_H_
#define HMC_TRANSPORTS_UCX_UCX_WIRE_H_

#include <cstdint>

namespace hmc {

// hmc's messages over UCX are UCP active messages, of two kinds. Data carries a message of the
// Channel contract, its tag in the header; hmc matches tags itself, per channel (see
// ucx_transport.h for why). Control carries the handshake and the link's notices, their fields
// in the payload (WireWriter).
enum class UcxAm : unsigned { kControl = 1, kData = 2 };

enum class UcxControl : uint8_t {
  kChallenge = 1,  // {world, nonce}: sent on a new endpoint.
  kHello = 2,      // {world, rank, to_rank, epoch, proof over the peer's nonce}.
  kAccept = 3,     // {}: the peer's hello checked out; data may flow.
  kRefuse = 4,     // {reason}: the hello did not.
  kLeave = 5,      // {reason}: the sender closed or failed the link.
  kGoodbye = 6,    // {}: the sender shuts down; it sends nothing after this.
};

// Every header names the sending rank: a worker receives from all of its endpoints at once.
struct UcxDataHeader {
  uint64_t tag;
  int32_t from;
  uint32_t reserved;
};

struct UcxControlHeader {
  int32_t from;
  uint8_t type;  // A UcxControl.
  uint8_t reserved[3];
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_UCX_UCX_WIRE_H_
