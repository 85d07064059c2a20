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
  Options options = spec.options;
  if (options.token.empty()) options.token = RandomToken();
  options.world_size = spec.ranks;
  absl::StatusOr<CoordinatorConfig> config = CoordinatorConfigFor(options);
  if (!config.ok()) return config.status();
  config->bind = spec.coordinator_bind;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(*config);
  if (!coordinator.ok()) return coordinator.status();
  options.coordinator = (*coordinator)->address().ToString();
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
