#ifndef HMC_COLLECTIVES_JOINER_LINKS_H_
#define HMC_COLLECTIVES_JOINER_LINKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/link_probe.h"
#include "core/peer_table.h"

namespace hmc {

// The newest link probe of a world: the ranks it measured (stable ids, in its group's order) and
// their matrix (by position in `ids`). Every rank that took part holds the same bits; the
// coordinator keeps a copy (LinkProbeKey) for the ranks that join later.
struct LinkProbeRecord {
  std::vector<int> ids;
  LinkMatrix links;

  bool empty() const { return !links.measured(); }
  std::string Serialize() const;
  static absl::StatusOr<LinkProbeRecord> Parse(absl::string_view bytes);
  // FNV-1a of Serialize(); 0 for an empty record.
  uint64_t Fingerprint() const;
};

// The links of the world of `table`, by stable id (size table.world_size), that every rank of an
// epoch computes alike from the probe and the table alone. A rank that joined after the probe is
// not probed again: its round trips are the ones it measured to each member when it connected
// (PeerEntry::joined), and its rates those of the probed rank that stands in for it: of its
// zone, with the round trips closest to its own (a replacement usually gets the rank it
// replaces). Unmeasured (size 0) when a live member's links cannot be had: no probe, a joiner that
// knew another probe or none, or no probed rank in a joiner's zone.
LinkMatrix WorldLinks(const LinkProbeRecord& probe, const PeerTable& table);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_JOINER_LINKS_H_
