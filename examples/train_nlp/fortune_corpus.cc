#include "examples/train_nlp/fortune_corpus.h"

#include <ATen/ops/tensor.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hmc::examples {

absl::StatusOr<at::Tensor> LoadFortunes(const std::string& dir) {
  std::error_code error;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    // The databases themselves: not their .dat indexes nor the .u8 links to them.
    if (entry.is_regular_file() && !entry.is_symlink() && !entry.path().has_extension()) {
      files.push_back(entry.path());
    }
  }
  if (error || files.empty()) {
    return absl::NotFoundError(absl::StrCat("no fortune databases in ", dir,
                                            " (Debian's fortunes package installs them)"));
  }
  std::sort(files.begin(), files.end());
  std::vector<int64_t> tokens;
  for (const auto& path : files) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      if (line != "%") {
        for (unsigned char c : line) tokens.push_back(c);
      }
      tokens.push_back('\n');
    }
  }
  return at::tensor(tokens, at::kLong);
}

}  // namespace hmc::examples
