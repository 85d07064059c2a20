#ifndef HMC_CORE_OPTION_TABLE_H_
#define HMC_CORE_OPTION_TABLE_H_

#include <cstdint>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hmc {

// One tunable of a layer's options struct S: its name (the flag --name=VALUE and the variable
// HMC_NAME), the field it sets and what it does. Each layer declares its struct and its table in
// its own directory (core/options.h, transports/transport_options.h,
// collectives/collective_options.h), next to the code that reads them; hmc::Options
// (collectives/options.h) joins them for programs.
template <typename S>
struct OptionSpec {
  using Field = std::variant<std::string S::*, int64_t S::*, bool S::*, absl::Duration S::*>;
  absl::string_view name;
  Field field;
  absl::string_view help;
};

// HMC_FOO_BAR for foo_bar.
std::string OptionVariable(absl::string_view name);

// A value's text into a field of its type; the error names the option and its variable.
absl::Status ParseOptionValue(absl::string_view name, absl::string_view text, std::string& out);
absl::Status ParseOptionValue(absl::string_view name, absl::string_view text, int64_t& out);
absl::Status ParseOptionValue(absl::string_view name, absl::string_view text, bool& out);
absl::Status ParseOptionValue(absl::string_view name, absl::string_view text, absl::Duration& out);
// A field's value as the text ParseOptionValue reads back.
std::string FormatOptionValue(const std::string& value);
std::string FormatOptionValue(int64_t value);
std::string FormatOptionValue(bool value);
std::string FormatOptionValue(absl::Duration value);

template <typename S>
absl::Status AssignOption(S& options, const OptionSpec<S>& spec, absl::string_view text) {
  return std::visit([&](auto field) { return ParseOptionValue(spec.name, text, options.*field); },
                    spec.field);
}

template <typename S>
std::string FormatOption(const S& options, const OptionSpec<S>& spec) {
  return std::visit([&](auto field) { return FormatOptionValue(options.*field); }, spec.field);
}

// A layer's spec as a spec of a struct derived from the layer's (the joined options).
template <typename Derived, typename Layer>
OptionSpec<Derived> WidenOptionSpec(const OptionSpec<Layer>& spec) {
  return {spec.name,
          std::visit([](auto field) -> typename OptionSpec<Derived>::Field { return field; },
                     spec.field),
          spec.help};
}

}  // namespace hmc

#endif  // HMC_CORE_OPTION_TABLE_H_
