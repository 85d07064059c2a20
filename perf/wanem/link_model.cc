#include "perf/wanem/link_model.h"

#include <algorithm>

namespace hmc::wanem {

std::optional<absl::Time> RateStage::Pass(absl::Time arrival, uint64_t bytes) {
  if (bytes_per_second_ <= 0) return arrival;
  const absl::Time start = std::max(arrival, free_at_);
  const double backlog = absl::ToDoubleSeconds(start - arrival) * bytes_per_second_;
  if (backlog + static_cast<double>(bytes) > static_cast<double>(queue_bytes_)) return std::nullopt;
  free_at_ = start + absl::Seconds(static_cast<double>(bytes) / bytes_per_second_);
  return free_at_;
}

absl::StatusOr<LinkModel> LinkModel::Create(const Topology& topology, uint64_t seed) {
  LinkModel model;
  const int n = static_cast<int>(topology.hosts.size());
  model.hosts_ = n;
  model.queue_bytes_ = topology.queue_bytes;
  model.rng_.seed(seed);
  for (const Host& h : topology.hosts) {
    model.nic_out_.emplace_back(topology.NicBps(h), topology.queue_bytes);
    model.nic_in_.emplace_back(topology.NicBps(h), topology.queue_bytes);
  }
  std::map<std::pair<std::string, std::string>, int> stage_of_region_pair;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const Host& from = topology.hosts[a];
      const Host& to = topology.hosts[b];
      absl::StatusOr<PathSpec> path = topology.PathBetween(from, to);
      if (!path.ok()) return path.status();
      model.paths_.push_back(*path);
      auto [it, inserted] = stage_of_region_pair.try_emplace(
          {from.region, to.region}, static_cast<int>(model.path_stages_.size()));
      if (inserted) model.path_stages_.emplace_back(path->capacity_bps, topology.queue_bytes);
      model.path_stage_.push_back(it->second);
    }
  }
  model.last_release_.assign(n * n, absl::InfinitePast());
  model.counters_.resize(n * n);
  return model;
}

std::optional<absl::Time> LinkModel::Admit(int from, int to, uint64_t flow, uint64_t bytes,
                                           absl::Time now) {
  const int pair = from * hosts_ + to;
  const PathSpec& path = paths_[pair];
  Counters& counters = counters_[pair];
  ++counters.packets;
  counters.bytes += bytes;
  if (path.loss > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < path.loss) {
    ++counters.random_losses;
    return std::nullopt;
  }
  // Flows idle for long are forgotten, so the table stays small.
  if (flows_.size() > 4096) {
    std::erase_if(flows_, [&](const auto& entry) {
      return entry.second.free_at() < now - absl::Seconds(10);
    });
  }
  RateStage& flow_stage =
      flows_.try_emplace({from, to, flow}, path.flow_bps, queue_bytes_).first->second;
  std::optional<absl::Time> t = nic_out_[from].Pass(now, bytes);
  if (t) t = flow_stage.Pass(*t, bytes);
  if (t) t = path_stages_[path_stage_[pair]].Pass(*t, bytes);
  if (t) t = nic_in_[to].Pass(*t, bytes);
  if (!t) {
    ++counters.queue_drops;
    return std::nullopt;
  }
  absl::Duration delay = path.rtt / 2;
  if (path.jitter > absl::ZeroDuration()) {
    delay += path.jitter * std::uniform_real_distribution<double>(0, 1)(rng_);
  }
  const absl::Time release = std::max(*t + delay, last_release_[pair]);
  last_release_[pair] = release;
  return release;
}

}  // namespace hmc::wanem
