#ifndef HMC_CORE_PEER_TABLE_H_
#define HMC_CORE_PEER_TABLE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hmc {

struct PeerEntry {
  int rank = -1;
  std::string address;  // Transport listen address, host:port.
  std::string zone;
  std::string hostname;
  bool alive = true;
  std::string failure;  // Why the coordinator declared it failed; empty while alive.
  // Admitted into a running group but not yet a member: it is connecting to the members, and
  // becomes one in the next epoch (alive) or is dropped.
  bool joining = false;
};

// The coordinator's view of the world at one membership epoch.
struct PeerTable {
  uint32_t epoch = 0;
  int world_size = 0;
  std::vector<PeerEntry> peers;  // Indexed by rank.

  // The live members' stable ids, in order.
  std::vector<int> Members() const;

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<PeerTable> Parse(std::span<const uint8_t> bytes);
  // "rank 2 (host, 127.0.0.1:4000)" for error messages: the entry at `rank`, named by its own
  // rank (a group's table lists its members densely, each under its stable id).
  std::string Describe(int rank) const;
};

}  // namespace hmc

#endif  // HMC_CORE_PEER_TABLE_H_
