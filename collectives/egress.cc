#include "collectives/egress.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace hmc {
namespace {

bool Matches(absl::string_view pattern, absl::string_view zone) {
  if (absl::EndsWith(pattern, "*")) {
    return absl::StartsWith(zone, pattern.substr(0, pattern.size() - 1));
  }
  return pattern == zone;
}

}  // namespace

const char kDefaultPrices[] =
    "# from    to      usd_per_gb   (first match wins; inside a zone is free)\n"
    "onprem*   *       0\n"
    "lambda*   *       0\n"
    "aws*      *       0.02\n"
    "azure*    *       0.02\n"
    "*         oce*    0.15\n"
    "*         *       0.08\n";

PriceTable PriceTable::Default() { return *Parse(kDefaultPrices); }

absl::StatusOr<PriceTable> PriceTable::Parse(absl::string_view text) {
  PriceTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = line.substr(0, line.find('#'));
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.empty()) continue;
    double price;
    if (fields.size() != 3 || !absl::SimpleAtod(fields[2], &price) || price < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "price table line %d: expected FROM TO USD_PER_GB, got '%s'", line_number, line));
    }
    table.rules_.push_back(Rule{std::string(fields[0]), std::string(fields[1]), price});
  }
  return table;
}

absl::StatusOr<PriceTable> PriceTable::Load(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrFormat("cannot read price table %s", path));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<PriceTable> table = Parse(text.str());
  if (!table.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", path, table.status().message()));
  }
  return table;
}

double PriceTable::UsdPerGb(absl::string_view from_zone, absl::string_view to_zone) const {
  if (from_zone == to_zone) return 0;
  for (const Rule& rule : rules_) {
    if (Matches(rule.from, from_zone) && Matches(rule.to, to_zone)) return rule.usd_per_gb;
  }
  return 0;
}

}  // namespace hmc
