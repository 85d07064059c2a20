#ifndef HMC_EXAMPLES_COMMON_TRAINING_FLAGS_H_
#define HMC_EXAMPLES_COMMON_TRAINING_FLAGS_H_

#include <functional>
#include <memory>

#include "absl/flags/declare.h"
#include "absl/strings/string_view.h"
#include "examples/common/training_run.h"

// The flags every training example has: how gradients meet (--sync, --target_batch,
// --delay_updates, --codec_inter, --codec_intra, --bucket_kb, --inner_steps, --outer_lr,
// --outer_momentum, --fragments), --threads, --json, --progress,
// --checkpoint, --epochs and --seed.
ABSL_DECLARE_FLAG(int, epochs);
ABSL_DECLARE_FLAG(int, seed);

namespace hmc::examples {

// Starts the run with the settings from the flags (--target_batch 0: four global batches;
// --json's default: PROGRAM.jsonl); throws std::runtime_error when it cannot.
std::unique_ptr<TrainingRun> StartFromFlags(absl::string_view program, int64_t global_batch);

// DiLoCo's settings that suit an example's model and run length: its defaults of --inner_steps,
// --outer_lr and --outer_momentum (--help shows them as "currently").
struct DiLoCoDefaults {
  int inner_steps = 50;
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
};

// An example's main: parses the flags, runs `body`, and turns an exception into an error line
// "PROGRAM: what" and exit status 1.
int RunExample(int argc, char** argv, absl::string_view program, absl::string_view usage,
               const std::function<int()>& body, const DiLoCoDefaults& diloco = {});

}  // namespace hmc::examples

#endif  // HMC_EXAMPLES_COMMON_TRAINING_FLAGS_H_
