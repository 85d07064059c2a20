#include "core/option_table.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hmc {
namespace {

absl::Status NotA(absl::string_view name, absl::string_view text, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrFormat("option %s (%s): '%s' is not %s", name,
                                                    OptionVariable(name), text, expected));
}

}  // namespace

std::string OptionVariable(absl::string_view name) { return "HMC_" + absl::AsciiStrToUpper(name); }

absl::Status ParseOptionValue(absl::string_view, absl::string_view text, std::string& out) {
  out = std::string(text);
  return absl::OkStatus();
}

absl::Status ParseOptionValue(absl::string_view name, absl::string_view text, int64_t& out) {
  int64_t parsed;
  if (!absl::SimpleAtoi(text, &parsed)) return NotA(name, text, "an integer");
  out = parsed;
  return absl::OkStatus();
}

absl::Status ParseOptionValue(absl::string_view name, absl::string_view text, bool& out) {
  bool parsed;
  if (!absl::SimpleAtob(text, &parsed)) return NotA(name, text, "a boolean (0/1, true/false)");
  out = parsed;
  return absl::OkStatus();
}

absl::Status ParseOptionValue(absl::string_view name, absl::string_view text, absl::Duration& out) {
  absl::Duration parsed;
  if (!absl::ParseDuration(text, &parsed)) {
    return NotA(name, text, "a duration such as 10s or 250ms");
  }
  out = parsed;
  return absl::OkStatus();
}

std::string FormatOptionValue(const std::string& value) { return value; }
std::string FormatOptionValue(int64_t value) { return absl::StrCat(value); }
std::string FormatOptionValue(bool value) { return value ? "1" : "0"; }
std::string FormatOptionValue(absl::Duration value) { return absl::FormatDuration(value); }

}  // namespace hmc
