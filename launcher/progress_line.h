#ifndef HMC_LAUNCHER_PROGRESS_LINE_H_
#define HMC_LAUNCHER_PROGRESS_LINE_H_

#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hmc {

// A progress line that a person watches during a long loop (the training examples' epochs,
// hmc-perf's long runs): the first update and then at most one per `interval`. On a terminal the
// line is rewritten in place and erased by Clear; elsewhere (a rank's output that hmcrun relays
// to a terminal) each update is a line of its own.
class ProgressLine {
 public:
  // `out`: where the lines go; `in_place`: rewrite one line (a terminal).
  ProgressLine(std::FILE* out, bool in_place, absl::Duration interval = absl::Seconds(1))
      : out_(out), in_place_(in_place), interval_(interval) {}
  ~ProgressLine() { Clear(); }

  // Whether an update now would be shown: callers build the text only then.
  bool Due(absl::Time now) const { return now - last_ >= interval_; }
  void Show(absl::string_view text, absl::Time now);
  // Erases an in-place line, so that the next output starts on a clean line.
  void Clear();

 private:
  std::FILE* const out_;
  const bool in_place_;
  const absl::Duration interval_;
  absl::Time last_ = absl::InfinitePast();
  bool shown_ = false;
};

// Whether a person watches this process's output `fd`: it is a terminal, or hmcrun, whose own
// output is one, started this process (HMC_TERMINAL=1).
bool OutputWatched(int fd);

}  // namespace hmc

#endif  // HMC_LAUNCHER_PROGRESS_LINE_H_
