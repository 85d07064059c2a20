#include "perf/wanem/link_model.h"

#include <algorithm>

namespace hmc::wanem {
namespace {
constexpr int kStages = 4;  // Source NIC, flow cap, path, destination NIC.
constexpr uint64_t kMinFlowQueueBytes = 64 << 10;
// A flow's queue takes at least a burst of this many full-size packets: a TCP sender's initial
// window is 10 (and after an idle spell it restarts from there). Scaling rates down shrinks a
// path's bandwidth-delay product, at MTU 9000 to a few packets on the slowest scaled paths, where
// the unscaled path holds hundreds; a queue smaller than one initial window would drop the tail
// of every burst and cost a retransmission timeout of a long path, which the real path does not.
constexpr uint64_t kMinFlowQueuePackets = 16;
}  // namespace

std::optional<absl::Time> RateStage::Pass(absl::Time arrival, uint64_t bytes) {
  if (bytes_per_second_ <= 0) return arrival;
  if (police_) {
    if (free_at_ != absl::InfinitePast()) {
      tokens_ = std::min(static_cast<double>(queue_bytes_),
                         tokens_ + absl::ToDoubleSeconds(arrival - free_at_) * bytes_per_second_);
    }
    free_at_ = arrival;
    if (tokens_ < static_cast<double>(bytes)) return std::nullopt;
    tokens_ -= static_cast<double>(bytes);
    return arrival;
  }
  const absl::Time start = std::max(arrival, free_at_);
  const double backlog = absl::ToDoubleSeconds(start - arrival) * bytes_per_second_;
  if (backlog + static_cast<double>(bytes) > static_cast<double>(queue_bytes_)) return std::nullopt;
  free_at_ = start + absl::Seconds(static_cast<double>(bytes) / bytes_per_second_);
  return free_at_;
}

absl::StatusOr<LinkModel> LinkModel::Create(const Topology& topology, uint64_t seed, int mtu) {
  LinkModel model;
  model.mtu_ = static_cast<uint64_t>(mtu);
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
  model.counters_.resize(n * n);
  model.topology_paths_ = model.paths_;
  return model;
}

uint64_t LinkModel::FlowQueueBytes(const PathSpec& path) const {
  // A window-limited stream holds its data at the sender, not in a queue on the path: a deep
  // queue here would let one stream's backlog delay every later message on it by seconds
  // (4 MiB at 7 Mbit/s is 4.8 s). One round trip of the flow's rate keeps TCP at the cap. A
  // policer's bucket is sized the same way.
  const auto bdp = static_cast<uint64_t>(path.flow_bps / 8 * absl::ToDoubleSeconds(path.rtt));
  return std::min(queue_bytes_, std::max({kMinFlowQueueBytes, kMinFlowQueuePackets * mtu_, bdp}));
}

uint64_t LinkModel::Admit(int from, int to, uint64_t flow, uint64_t bytes, absl::Time now) {
  const int pair = from * hosts_ + to;
  const PathSpec& path = paths_[pair];
  Counters& counters = counters_[pair];
  ++counters.packets;
  counters.bytes += bytes;
  if (path.loss > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < path.loss) {
    ++counters.random_losses;
    return 0;
  }
  // Flows idle for long are forgotten, so the table stays small. A flow with packets inside
  // the pipeline is never idle that long (its last release is ahead of now).
  if (flows_.size() > 4096) {
    std::erase_if(flows_, [&](const auto& entry) {
      return entry.second.in_pipeline == 0 &&
             std::max(entry.second.cap.free_at(), entry.second.last_release) <
                 now - absl::Seconds(10);
    });
  }
  Flow& f = flows_
                .try_emplace({from, to, flow},
                             Flow{RateStage(path.flow_bps, FlowQueueBytes(path), path.police)})
                .first->second;
  const uint64_t id = next_id_++;
  ++f.in_pipeline;
  events_.push(Event{now, id, 0, from, to, bytes, &f});
  return id;
}

void LinkModel::Override(int from, int to, double loss, double flow_bps) {
  PathSpec& path = paths_[from * hosts_ + to];
  path.loss = loss >= 0 ? loss : topology_paths_[from * hosts_ + to].loss;
  if (flow_bps > 0)
    path.flow_bps = std::min(topology_paths_[from * hosts_ + to].flow_bps, flow_bps);
  for (auto& [key, flow] : flows_) {
    if (std::get<0>(key) == from && std::get<1>(key) == to) flow.cap.SetRate(path.flow_bps);
  }
}

void LinkModel::ClearOverrides() {
  paths_ = topology_paths_;
  for (auto& [key, flow] : flows_) {
    flow.cap.SetRate(paths_[std::get<0>(key) * hosts_ + std::get<1>(key)].flow_bps);
  }
}

RateStage& LinkModel::StageOf(const Event& e) {
  switch (e.stage) {
    case 0:
      return nic_out_[e.from];
    case 1:
      return e.flow->cap;
    case 2:
      return path_stages_[path_stage_[e.from * hosts_ + e.to]];
    default:
      return nic_in_[e.to];
  }
}

void LinkModel::Advance(absl::Time now, std::vector<Outcome>* outcomes) {
  while (!events_.empty() && events_.top().time <= now) {
    Event e = events_.top();
    events_.pop();
    std::optional<absl::Time> left = StageOf(e).Pass(e.time, e.bytes);
    if (!left.has_value()) {
      ++counters_[e.from * hosts_ + e.to].queue_drops;
      --e.flow->in_pipeline;
      outcomes->push_back(Outcome{e.id, true, absl::InfinitePast()});
      continue;
    }
    if (++e.stage < kStages) {
      e.time = *left;
      events_.push(e);
      continue;
    }
    const PathSpec& path = paths_[e.from * hosts_ + e.to];
    absl::Duration delay = path.rtt / 2;
    if (path.jitter > absl::ZeroDuration()) {
      delay += path.jitter * std::uniform_real_distribution<double>(0, 1)(rng_);
    }
    e.flow->last_release = std::max(*left + delay, e.flow->last_release);
    --e.flow->in_pipeline;
    outcomes->push_back(Outcome{e.id, false, e.flow->last_release});
  }
}

std::optional<absl::Time> LinkModel::NextEvent() const {
  if (events_.empty()) return std::nullopt;
  return events_.top().time;
}

}  // namespace hmc::wanem
