#ifndef HMC_EXAMPLES_TRAIN_NLP_FORTUNE_CORPUS_H_
#define HMC_EXAMPLES_TRAIN_NLP_FORTUNE_CORPUS_H_

#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/statusor.h"

namespace hmc::examples {

inline constexpr char kFortunesDir[] = "/usr/share/games/fortunes";

// English text for a character-level language model: every fortune database that Debian's
// `fortunes` package installs (about 2.5 MB), in name order, with the "%" lines that separate
// fortunes turned into blank lines. Bytes as int64 tokens (0..255).
absl::StatusOr<at::Tensor> LoadFortunes(const std::string& dir);

}  // namespace hmc::examples

#endif  // HMC_EXAMPLES_TRAIN_NLP_FORTUNE_CORPUS_H_
