#include "launcher/progress_line.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace hmc {

void ProgressLine::Show(absl::string_view text, absl::Time now) {
  last_ = now;
  if (in_place_) {
    // Carriage return, the text, then erase what a longer earlier line left behind.
    std::fprintf(out_, "\r%.*s\033[K", static_cast<int>(text.size()), text.data());
  } else {
    std::fprintf(out_, "%.*s\n", static_cast<int>(text.size()), text.data());
  }
  std::fflush(out_);
  shown_ = true;
}

void ProgressLine::Clear() {
  if (!shown_ || !in_place_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  shown_ = false;
}

bool OutputWatched(int fd) {
  if (isatty(fd) == 1) return true;
  const char* terminal = std::getenv("HMC_TERMINAL");
  return terminal != nullptr && std::strcmp(terminal, "1") == 0;
}

}  // namespace hmc
