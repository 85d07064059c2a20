#ifndef HMC_CORE_REJECTION_LOG_H_
#define HMC_CORE_REJECTION_LOG_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/mutex.h"

namespace hmc {

// What a service refused ("ADDRESS: reason"), for its operators and tests. A flood of garbage or
// half-open connections must cost neither unbounded memory nor an unreadable log: the newest
// kKept entries stay in memory, and at most kLinesPerSecond are logged each second, followed by
// how many were not. Thread-safe.
class RejectionLog {
 public:
  static constexpr size_t kKept = 1000;
  static constexpr int kLinesPerSecond = 20;

  explicit RejectionLog(std::string component) : component_(std::move(component)) {}

  void Add(const std::string& peer, const std::string& reason);
  std::vector<std::string> recent() const;  // Oldest first.

 private:
  const std::string component_;
  mutable Mutex mu_;
  std::deque<std::string> recent_ ABSL_GUARDED_BY(mu_);
  uint64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time window_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int logged_in_window_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unlogged_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hmc

#endif  // HMC_CORE_REJECTION_LOG_H_
