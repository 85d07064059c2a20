#include "collectives/group.h"

#include <algorithm>
#include <map>
#include <string>

namespace hmc {
namespace {

// The links among `ids` (stable ids) in `world_links`, by dense rank; unmeasured where a member's
// are not known (joiner_links.h): the group plans without.
LinkMatrix MemberLinks(const std::vector<int>& ids, const LinkMatrix& world_links) {
  const bool all_measured =
      world_links.measured() &&
      std::all_of(ids.begin(), ids.end(), [&](int id) { return id < world_links.size; });
  if (!all_measured) return {};
  LinkMatrix links;
  const int n = static_cast<int>(ids.size());
  links.size = n;
  links.auto_codec_bytes_per_s = world_links.auto_codec_bytes_per_s;
  links.rtt_ms.assign(n * n, 0.0);
  links.mbit.assign(n * n, 0.0);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      links.rtt_ms[a * n + b] = world_links.rtt(ids[a], ids[b]);
      links.mbit[a * n + b] = world_links.rate(ids[a], ids[b]);
    }
  }
  return links;
}

double CpuShare(const std::vector<PeerEntry>& members) {
  std::map<std::string, std::pair<int, int>> hosts;  // Hostname -> (CPUs, members there).
  for (const PeerEntry& p : members) {
    auto& [cpus, count] = hosts[p.hostname];
    cpus = std::max(cpus, p.cpus);
    ++count;
  }
  double share = 1;
  for (const auto& [host, cpus_and_count] : hosts) {
    const auto [cpus, count] = cpus_and_count;
    if (cpus > 0) share = std::min(share, static_cast<double>(cpus) / count);
  }
  return share;
}

}  // namespace

std::shared_ptr<const Group> Group::Make(
    const PeerTable& table, int self_id,
    const std::vector<std::shared_ptr<Channel>>& world_channels, const LinkMatrix& world_links) {
  auto g = std::make_shared<Group>();
  g->epoch = table.epoch;
  g->peers.epoch = table.epoch;
  std::map<std::string, int> zones;
  for (const PeerEntry& p : table.peers) {
    if (!p.alive && p.rank != self_id) continue;
    if (p.rank == self_id) g->rank = g->size();
    g->ids.push_back(p.rank);
    g->channels.push_back(p.rank == self_id ? nullptr : world_channels.at(p.rank));
    g->peers.peers.push_back(p);
    g->zone_of.push_back(zones.emplace(p.zone, static_cast<int>(zones.size())).first->second);
  }
  g->peers.world_size = g->size();
  g->cpu_share = CpuShare(g->peers.peers);
  g->links = std::make_shared<const LinkMatrix>(MemberLinks(g->ids, world_links));
  return g;
}

std::shared_ptr<const Group> Group::WithWorldLinks(const LinkMatrix& world_links) const {
  return WithLinks(MemberLinks(ids, world_links));
}

std::shared_ptr<const Group> Group::WithLinks(LinkMatrix links) const {
  auto g = std::make_shared<Group>(*this);
  g->links = std::make_shared<const LinkMatrix>(std::move(links));
  return g;
}

}  // namespace hmc
