// The WAN emulator's topology parser, and the paths it computes between every pair of hosts.
#include <cstddef>
#include <cstdint>

#include "perf/wanem/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<hmc::wanem::Topology> topology = hmc::wanem::ParseTopology(text, "fuzz");
  if (!topology.ok()) return 0;
  size_t pairs = 0;
  for (const auto& from : topology->hosts) {
    for (const auto& to : topology->hosts) {
      if (++pairs > 4096) return 0;
      topology->PathBetween(from, to).IgnoreError();
    }
  }
  return 0;
}
