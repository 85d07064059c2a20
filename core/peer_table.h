#ifndef HMC_CORE_PEER_TABLE_H_
#define HMC_CORE_PEER_TABLE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/wire.h"

namespace hmc {

// What a rank that joined a running group measured of its links when it connected: its round
// trips to the members, by stable id (ms; 0: the same host; -1: none), and the fingerprint of the
// link probe it knew (0: none), from which every rank infers the rest of its links alike
// (collectives/joiner_links.h). Sent with kJoinReady; the table carries it.
struct JoinedLinks {
  uint64_t probe = 0;
  std::vector<double> rtt_ms;

  void Write(WireWriter& w) const;
  // What Write wrote, with at most `max_ranks` round trips.
  absl::Status Read(WireReader& r, size_t max_ranks);
  // As kJoinReady's payload.
  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<JoinedLinks> Parse(std::span<const uint8_t> bytes);
};

struct PeerEntry {
  int rank = -1;
  std::string address;  // Transport listen address, host:port.
  std::string zone;
  std::string hostname;
  int32_t cpus = 0;  // CPUs online on its host, as it reported them (0: unknown).
  bool alive = true;
  std::string failure;  // Why the coordinator declared it failed; empty while alive.
  // Admitted into a running group but not yet a member: it is connecting to the members, and
  // becomes one in the next epoch (alive) or is dropped.
  bool joining = false;
  JoinedLinks joined;  // A rank that joined a running group: what it measured of its links.
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

// A transport address as messages show it: a part longer than 40 characters (a UCX worker's
// address) is cut to its first 32 and "...".
std::string ShortAddress(absl::string_view address);

}  // namespace hmc

#endif  // HMC_CORE_PEER_TABLE_H_
