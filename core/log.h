#ifndef HMC_CORE_LOG_H_
#define HMC_CORE_LOG_H_

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace hmc {

// One line to stderr with a UTC timestamp and the component: "2026-11-30T16:00:00.123Z
// hmc[coordinator] ...". Lines are written with a single write(2) so concurrent processes do not
// interleave them.
void LogLine(absl::string_view component, absl::string_view message);

template <typename... Args>
void Logf(absl::string_view component, const absl::FormatSpec<Args...>& format,
          const Args&... args) {
  LogLine(component, absl::StrFormat(format, args...));
}

}  // namespace hmc

#endif  // HMC_CORE_LOG_H_
