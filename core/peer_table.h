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
  // A rank that joined a running group: its round trips to the members, by stable id, as it
  // measured them when it connected (ms; 0: the same host; -1: none), and the fingerprint of the
  // link probe it knew (0: none), from which every rank infers the rest of its links alike
  // (collectives/joiner_links.h).
  std::vector<double> joined_rtt_ms;
  uint64_t links_basis = 0;
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
