#include "launcher/local_group.h"

#include <signal.h>

#include <memory>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/auth.h"
#include "core/coordinator.h"
#include "core/log.h"
#include "launcher/process.h"

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
  std::vector<Process> ranks;
  for (int r = 0; r < spec.ranks; ++r) {
    options.rank = r;
    if (!spec.zones.empty()) options.zone = spec.zones[r % spec.zones.size()];
    absl::StatusOr<Process> p = Process::Spawn(spec.argv, options.ToEnvironment());
    if (!p.ok()) return p.status();
    ranks.push_back(std::move(*p));
  }
  const absl::Time deadline = absl::Now() + spec.timeout;
  std::optional<int> first_failure;
  std::vector<bool> exited(spec.ranks, false);
  int running = spec.ranks;
  absl::Time kill_at = absl::InfiniteFuture();
  while (running > 0) {
    for (int r = 0; r < spec.ranks; ++r) {
      int code;
      if (exited[r] || !ranks[r].Poll(&code)) continue;
      exited[r] = true;
      --running;
      if (code != 0 && !first_failure.has_value()) {
        first_failure = code;
        Logf("launcher", "rank %d exited with status %d; stopping the others", r, code);
        for (Process& p : ranks) p.Signal(SIGTERM);
        kill_at = absl::Now() + absl::Seconds(5);
      }
    }
    const absl::Time now = absl::Now();
    if (now >= kill_at) {
      for (Process& p : ranks) p.Signal(SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
    if (now >= deadline) {
      for (Process& p : ranks) p.Signal(SIGKILL);
      for (Process& p : ranks) p.Wait(absl::Now() + absl::Seconds(5)).IgnoreError();
      return absl::DeadlineExceededError(absl::StrFormat("the group ran past its timeout of %s",
                                                         absl::FormatDuration(spec.timeout)));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return first_failure.value_or(0);
}

}  // namespace hmc
