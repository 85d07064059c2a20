#include "core/rejection_log.h"

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/log.h"

namespace hmc {

void RejectionLog::Add(const std::string& peer, const std::string& reason) {
  std::string entry = absl::StrFormat("%s: %s", peer, reason);
  MutexLock lock(&mu_);
  ++total_;
  const absl::Time now = absl::Now();
  if (now - window_ >= absl::Seconds(1)) {
    if (unlogged_ > 0) {
      Logf(component_, "%d more connections were rejected and not logged (%d in all)", unlogged_,
           total_ - 1);
    }
    window_ = now;
    logged_in_window_ = 0;
    unlogged_ = 0;
  }
  if (logged_in_window_ < kLinesPerSecond) {
    ++logged_in_window_;
    Logf(component_, "rejected %s", entry);
  } else {
    ++unlogged_;
  }
  if (recent_.size() == kKept) recent_.pop_front();
  recent_.push_back(std::move(entry));
}

std::vector<std::string> RejectionLog::recent() const {
  MutexLock lock(&mu_);
  return {recent_.begin(), recent_.end()};
}

}  // namespace hmc
