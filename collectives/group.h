#ifndef HMC_COLLECTIVES_GROUP_H_
#define HMC_COLLECTIVES_GROUP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/link_probe.h"
#include "collectives/plan_trials.h"
#include "core/peer_table.h"
#include "transports/transport.h"

namespace hmc {

// The members of one membership epoch, as that epoch's calls see them. Every member has a stable
// id (the rank it joined the world with, which never changes) and, in this epoch, a dense rank:
// its position among the members in order of id. Algorithms see only dense ranks; messages name
// peers by id. A group never changes: a new epoch makes a new one, and each call keeps the group
// it was launched in.
struct Group {
  uint32_t epoch = 0;
  int rank = 0;                                    // This process's dense rank.
  std::vector<int> ids;                            // Dense rank -> stable id.
  std::vector<std::shared_ptr<Channel>> channels;  // By dense rank; null at `rank`.
  PeerTable peers;           // By dense rank; each entry's `rank` is the stable id.
  std::vector<int> zone_of;  // Each member's zone as a small integer, by first appearance.
  // What of a CPU each member has on its most crowded host: the least, over the members' hosts
  // (by hostname), of the host's CPUs per member there, at most 1; 1 where a host's CPUs are
  // unknown. The same on every member (the table is), as the tuner's inputs must be.
  double cpu_share = 1;
  // Round trips and rates between members, by dense rank; unmeasured (size 0) without a probe.
  std::shared_ptr<const LinkMatrix> links = std::make_shared<const LinkMatrix>();
  // The all-reduce trials of this epoch (plan_trials.h): every member starts them afresh in each
  // epoch, and a call made in an epoch that ended consumes that epoch's, not the next one's.
  std::shared_ptr<PlanTrials> trials = std::make_shared<PlanTrials>();

  int size() const { return static_cast<int>(ids.size()); }
  int id() const { return ids[rank]; }

  // The group of the table's live members. `world_channels` and `world_links` are indexed by
  // stable id (the links may be unmeasured); this process is `self_id`, which must be alive.
  static std::shared_ptr<const Group> Make(
      const PeerTable& table, int self_id,
      const std::vector<std::shared_ptr<Channel>>& world_channels, const LinkMatrix& world_links);
  // This group with the link matrix `links` (by dense rank), as a probe measured it.
  std::shared_ptr<const Group> WithLinks(LinkMatrix links) const;
  // This group with its members' links taken from `world_links` (by stable id).
  std::shared_ptr<const Group> WithWorldLinks(const LinkMatrix& world_links) const;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_GROUP_H_
