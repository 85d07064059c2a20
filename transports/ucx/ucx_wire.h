#ifndef HMC_TRANSPORTS_UCX_UCX_WIRE_H_
#define HMC_TRANSPORTS_UCX_UCX_WIRE_H_

#include <cstdint>

namespace hmc {

// hmc's messages over UCX are UCP active messages, of two kinds. Data carries a message of the
// Channel contract, its tag in the header; hmc matches tags itself, per channel (see
// ucx_transport.h for why). Control carries the handshake and the link's notices, their fields
// in the payload (WireWriter; transports/peer_handshake.h).
enum class UcxAm : unsigned { kControl = 1, kData = 2 };

// Every header names the sending rank: a worker receives from all of its endpoints at once.
struct UcxDataHeader {
  uint64_t tag;
  int32_t from;
  uint32_t reserved;
};

struct UcxControlHeader {
  int32_t from;
  uint8_t type;  // A ControlMessage.
  uint8_t reserved[3];
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_UCX_UCX_WIRE_H_
