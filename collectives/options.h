#ifndef HMC_COLLECTIVES_OPTIONS_H_
#define HMC_COLLECTIVES_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/collective_options.h"
#include "core/options.h"
#include "transports/transport_options.h"

namespace hmc {

// Every tunable of the runtime: each layer's own (core, transports, collectives), declared and
// documented beside the code that reads them, joined here for programs and the launcher. The
// name `foo_bar` is read from the environment variable HMC_FOO_BAR (as hmcrun sets them) and from
// the flag --foo_bar=VALUE; a flag wins over the environment. The README's option table is
// printed from the layers' tables by `hmc-perf --help-options`.
struct Options : CoreOptions, TransportOptions, CollectiveOptions {
  // Reads HMC_* variables over the defaults.
  static absl::StatusOr<Options> FromEnvironment();

  // Sets one option by name (`streams`, not `HMC_STREAMS`); a refused value changes nothing.
  absl::Status Set(absl::string_view name, absl::string_view value);

  // Consumes every `--name=value` argument that names an option and returns the others in order.
  absl::StatusOr<std::vector<std::string>> ApplyFlags(const std::vector<std::string>& args);

  // The environment (HMC_NAME=value) that makes a child process see these options.
  std::vector<std::string> ToEnvironment() const;

  // A markdown table of every option: name, variable, default, meaning; by layer.
  static std::string DescribeAll();

  // Every layer's checks.
  absl::Status Validate() const;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_OPTIONS_H_
