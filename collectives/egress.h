#ifndef HMC_COLLECTIVES_EGRESS_H_
#define HMC_COLLECTIVES_EGRESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hmc {

// What clouds charge per GB that leaves a zone, by sender and receiver zone. Lines of text:
//   FROM TO USD_PER_GB
// where FROM and TO are zone names, `*`, or a prefix ending in `*` ("gc-*"); the first line that
// matches wins, `#` starts a comment, and traffic inside a zone is free. The default table is the
// reference measurement's April 2023 prices (../shared/reference/wan-measurements.md):
// Google Cloud 0.08 $/GB between continents and 0.15 to Oceania, AWS and Azure 0.02, and nothing
// for an on-premise site or LambdaLabs, which do not bill egress.
class PriceTable {
 public:
  static PriceTable Default();
  static absl::StatusOr<PriceTable> Parse(absl::string_view text);
  // Reads a file in the format above.
  static absl::StatusOr<PriceTable> Load(const std::string& path);

  double UsdPerGb(absl::string_view from_zone, absl::string_view to_zone) const;

 private:
  struct Rule {
    std::string from, to;
    double usd_per_gb;
  };
  std::vector<Rule> rules_;
};

// The default table's text (also what `hmc-perf --help-prices` prints).
extern const char kDefaultPrices[];

}  // namespace hmc

#endif  // HMC_COLLECTIVES_EGRESS_H_
