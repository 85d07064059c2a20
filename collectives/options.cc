#include "collectives/options.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hmc {
namespace {

// Every layer's table, widened to the joined struct: the core's, the transports', the
// collectives'.
const std::vector<OptionSpec<Options>>& AllOptions() {
  static const std::vector<OptionSpec<Options>> all = [] {
    std::vector<OptionSpec<Options>> specs;
    for (const auto& spec : CoreOptions::Table()) specs.push_back(WidenOptionSpec<Options>(spec));
    for (const auto& spec : TransportOptions::Table()) {
      specs.push_back(WidenOptionSpec<Options>(spec));
    }
    for (const auto& spec : CollectiveOptions::Table()) {
      specs.push_back(WidenOptionSpec<Options>(spec));
    }
    return specs;
  }();
  return all;
}

const OptionSpec<Options>* Find(absl::string_view name) {
  for (const OptionSpec<Options>& spec : AllOptions()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

}  // namespace

absl::Status Options::Validate() const {
  if (absl::Status s = CoreOptions::Validate(); !s.ok()) return s;
  if (absl::Status s = TransportOptions::Validate(); !s.ok()) return s;
  return CollectiveOptions::Validate();
}

absl::StatusOr<Options> Options::FromEnvironment() {
  Options options;
  for (const OptionSpec<Options>& spec : AllOptions()) {
    const char* value = std::getenv(OptionVariable(spec.name).c_str());
    if (value == nullptr) continue;
    if (absl::Status s = AssignOption(options, spec, value); !s.ok()) return s;
  }
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return options;
}

absl::Status Options::Set(absl::string_view name, absl::string_view value) {
  const OptionSpec<Options>* spec = Find(name);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("unknown option '%s'", name));
  }
  Options candidate = *this;
  if (absl::Status s = AssignOption(candidate, *spec, value); !s.ok()) return s;
  if (absl::Status s = candidate.Validate(); !s.ok()) return s;
  *this = std::move(candidate);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Options::ApplyFlags(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  for (const std::string& arg : args) {
    absl::string_view view = arg;
    const size_t eq = view.find('=');
    if (absl::StartsWith(view, "--") && eq != absl::string_view::npos &&
        Find(view.substr(2, eq - 2)) != nullptr) {
      if (absl::Status s = Set(view.substr(2, eq - 2), view.substr(eq + 1)); !s.ok()) return s;
    } else {
      rest.push_back(arg);
    }
  }
  return rest;
}

std::vector<std::string> Options::ToEnvironment() const {
  std::vector<std::string> env;
  for (const OptionSpec<Options>& spec : AllOptions()) {
    env.push_back(OptionVariable(spec.name) + "=" + FormatOption(*this, spec));
  }
  return env;
}

std::string Options::DescribeAll() {
  const Options defaults;
  std::string out = "| option | variable | default | meaning |\n|---|---|---|---|\n";
  for (const OptionSpec<Options>& spec : AllOptions()) {
    const std::string value = FormatOption(defaults, spec);
    absl::StrAppend(&out, "| `--", spec.name, "` | `", OptionVariable(spec.name), "` | ",
                    value.empty() ? "(empty)" : "`" + value + "`", " | ", spec.help, " |\n");
  }
  return out;
}

}  // namespace hmc
