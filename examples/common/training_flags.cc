#include "examples/common/training_flags.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "launcher/progress_line.h"

ABSL_FLAG(int, epochs, 2, "Epochs to train.");
ABSL_FLAG(int, seed, 1, "Seed of the initial weights and the data order.");
ABSL_FLAG(std::string, sync, "ddp",
          "ddp (average every step), ddp-ft (the same, fault tolerant: a step that loses a rank "
          "commits with the survivors), reducer (the same through c10d::Reducer and the hmc "
          "hook), collab (collaborative optimizer), diloco (--inner_steps local steps, then an "
          "outer step on the averaged pseudo-gradient) or local (no averaging: a baseline).");
// The DiLoCo flags' defaults are each example's (DiLoCoDefaults): --help shows them as "currently".
ABSL_FLAG(int, inner_steps, hmc::examples::DiLoCoDefaults{}.inner_steps,
          "diloco: local optimizer steps between two syncs (H).");
ABSL_FLAG(double, outer_lr, hmc::examples::DiLoCoDefaults{}.outer_lr,
          "diloco: the outer SGD's learning rate.");
ABSL_FLAG(double, outer_momentum, hmc::examples::DiLoCoDefaults{}.outer_momentum,
          "diloco: the outer SGD's Nesterov momentum.");
ABSL_FLAG(int, fragments, 1,
          "diloco: sync the model in this many fragments at staggered steps, each overlapping "
          "the next local step (streaming DiLoCo); 1: all at once.");
ABSL_FLAG(int, target_batch, 0,
          "collab: samples the group processes per optimizer step (0: four global batches).");
ABSL_FLAG(bool, delay_updates, false, "collab: delayed parameter updates.");
ABSL_FLAG(std::string, lr_scaling, "none",
          "collab: scale the learning rate, tuned for the global batch, to the target batch: "
          "none, sqrt (for Adam) or linear (for SGD).");
ABSL_FLAG(int, warmup_rounds, 0,
          "collab: rounds over which the scaled learning rate ramps up from the tuned one.");
ABSL_FLAG(std::string, codec_inter, "",
          "Codec across zones (empty: HMC_CODEC_INTER; diloco: int8).");
ABSL_FLAG(std::string, codec_intra, "",
          "Codec inside a zone (empty: HMC_CODEC_INTRA; diloco: int8).");
ABSL_FLAG(int, bucket_kb, 4096, "ddp/reducer: gradient bucket size in KiB (DDP's bucket_cap).");
ABSL_FLAG(int, threads, 0, "Torch threads per rank (0: cores / ranks on this machine).");
ABSL_FLAG(std::string, json, "default",
          "Append per-epoch metrics here (default: PROGRAM.jsonl; empty: none).");
ABSL_FLAG(int, eval_every, 0,
          "Evaluate also every this many steps inside an epoch (0: only at its end): rank 0 "
          "prints each result and appends it to --json, with the seconds of training so far. "
          "Not with --sync=collab or ddp-ft.");
ABSL_FLAG(std::string, checkpoint, "", "Save after every epoch and resume from this file.");
ABSL_FLAG(std::string, progress, "auto",
          "A progress line during each epoch, at most one a second: auto (when the output is a "
          "terminal, or hmcrun's is), on or off.");

namespace hmc::examples {

std::unique_ptr<TrainingRun> StartFromFlags(absl::string_view program, int64_t global_batch) {
  const int target = absl::GetFlag(FLAGS_target_batch);
  const std::string progress = absl::GetFlag(FLAGS_progress);
  if (progress != "auto" && progress != "on" && progress != "off") {
    throw std::runtime_error("--progress=" + progress + ": auto, on or off");
  }
  const std::string json = absl::GetFlag(FLAGS_json);
  const std::string scaling = absl::GetFlag(FLAGS_lr_scaling);
  if (scaling != "none" && scaling != "sqrt" && scaling != "linear") {
    throw std::runtime_error("--lr_scaling=" + scaling + ": none, sqrt or linear");
  }
  return ValueOrThrow(TrainingRun::Start(
      {.sync = absl::GetFlag(FLAGS_sync),
       .target_batch = target > 0 ? target : 4 * global_batch,
       .delay_updates = absl::GetFlag(FLAGS_delay_updates),
       .base_batch = scaling == "none" ? 0 : global_batch,
       .lr_scaling_power = scaling == "linear" ? 1.0 : 0.5,
       .warmup_rounds = absl::GetFlag(FLAGS_warmup_rounds),
       .codec_inter = absl::GetFlag(FLAGS_codec_inter),
       .codec_intra = absl::GetFlag(FLAGS_codec_intra),
       .json_path = json == "default" ? absl::StrCat(program, ".jsonl") : json,
       .checkpoint_path = absl::GetFlag(FLAGS_checkpoint),
       .threads = absl::GetFlag(FLAGS_threads),
       .bucket_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_bucket_kb)) << 10,
       .inner_steps = absl::GetFlag(FLAGS_inner_steps),
       .outer_lr = absl::GetFlag(FLAGS_outer_lr),
       .outer_momentum = absl::GetFlag(FLAGS_outer_momentum),
       .fragments = absl::GetFlag(FLAGS_fragments),
       .progress = progress == "on" || (progress == "auto" && OutputWatched(STDOUT_FILENO)),
       .progress_in_place = isatty(STDOUT_FILENO) == 1,
       .eval_every = absl::GetFlag(FLAGS_eval_every)}));
}

namespace {

// glibc's malloc maps every block above its mmap threshold afresh and unmaps it when freed. The
// threshold starts at 128 KiB and rises only once such a block is freed, so a model's
// activations, megabytes each and freed every step, fault their pages in again every step until
// some large block happens to be freed. Fixed thresholds keep them in the heap, reused: train_cv
// trained 3 times faster (perf/RESULTS.md, "How long .ci/run takes", twenty-fifth stop).
void KeepLargeBlocksInTheHeap() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
}

}  // namespace

int RunExample(int argc, char** argv, absl::string_view program, absl::string_view usage,
               const std::function<int()>& body, const DiLoCoDefaults& diloco) {
  KeepLargeBlocksInTheHeap();
  absl::SetProgramUsageMessage(usage);
  absl::SetFlag(&FLAGS_inner_steps, diloco.inner_steps);
  absl::SetFlag(&FLAGS_outer_lr, diloco.outer_lr);
  absl::SetFlag(&FLAGS_outer_momentum, diloco.outer_momentum);
  absl::ParseCommandLine(argc, argv);
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", std::string(program).c_str(), e.what());
    return 1;
  }
}

}  // namespace hmc::examples
