#include "launcher/local_group.h"

#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/auth.h"
#include "core/coordinator.h"
#include "launcher/group_runner.h"

namespace hmc {

std::string RandomToken() { return absl::BytesToHexString(RandomNonce()); }

absl::StatusOr<int> RunLocalGroup(const LocalGroupSpec& spec) {
  CoordinatorConfig config;
  config.bind = spec.coordinator_bind;
  config.world_size = spec.ranks;
  config.world_id = spec.options.world_id;
  config.token = spec.options.token.empty() ? RandomToken() : spec.options.token;
  config.heartbeat_timeout = spec.options.heartbeat_timeout;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(config);
  if (!coordinator.ok()) return coordinator.status();
  Options options = spec.options;
  options.coordinator = (*coordinator)->address().ToString();
  options.token = config.token;
  options.world_size = spec.ranks;
  std::vector<RankProcess> ranks;
  for (int r = 0; r < spec.ranks; ++r) {
    options.rank = r;
    if (!spec.zones.empty()) options.zone = spec.zones[r % spec.zones.size()];
    ranks.push_back({.command = {.argv = spec.argv, .env = options.ToEnvironment()},
                     .name = absl::StrCat("rank ", r)});
  }
  return RunRanks(std::move(ranks), {.timeout = spec.timeout});
}

}  // namespace hmc
