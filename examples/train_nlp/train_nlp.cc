// train_nlp: a small character-level transformer language model on the English text of Debian's
// fortunes databases, alone or as one rank of a group started by hmcrun. Reports held-out
// perplexity (per character) every epoch of --steps_per_epoch global steps.
//   build/bin/train_nlp
//   build/bin/hmcrun -hosts examples/inventory.local build/bin/train_nlp
// NLP models are the hard case for the WAN (many parameters per unit of compute); this one has
// about 0.5 M parameters and sends them every step, unless --sync=collab batches steps up.
#include <torch/nn.h>
#include <torch/optim.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "examples/common/training_flags.h"
#include "examples/common/training_run.h"
#include "examples/train_nlp/fortune_corpus.h"

ABSL_FLAG(int, steps_per_epoch, 150, "Global batches per epoch.");
ABSL_FLAG(int, batch, 32, "Global batch of sequences (ddp): split evenly over the ranks.");
ABSL_FLAG(int, context, 64, "Characters per sequence.");
ABSL_FLAG(double, lr, 0.004, "Adam's learning rate.");
ABSL_FLAG(int, eval_windows, 256, "Held-out sequences for the perplexity.");
ABSL_FLAG(std::string, corpus_dir, hmc::examples::kFortunesDir, "The fortune databases.");

namespace hmc::examples {
namespace {

constexpr int kVocabulary = 256;  // Bytes.
constexpr int kWidth = 128;

struct CharTransformerImpl : torch::nn::Module {
  explicit CharTransformerImpl(int context)
      : token(kVocabulary, kWidth),
        position(context, kWidth),
        encoder(torch::nn::TransformerEncoderOptions(
            torch::nn::TransformerEncoderLayerOptions(kWidth, 4)
                .dim_feedforward(4 * kWidth)
                .dropout(0.0),
            2)),
        norm(torch::nn::LayerNormOptions({kWidth})),
        head(kWidth, kVocabulary),
        causal(torch::nn::TransformerImpl::generate_square_subsequent_mask(context)) {
    register_module("token", token);
    register_module("position", position);
    register_module("encoder", encoder);
    register_module("norm", norm);
    register_module("head", head);
  }
  // tokens [N, S] -> logits [N, S, vocabulary]; each position sees only the ones before it.
  torch::Tensor forward(const torch::Tensor& tokens) {
    const int64_t length = tokens.size(1);
    torch::Tensor x = token(tokens) + position(torch::arange(length, torch::kLong));
    x = encoder(x.transpose(0, 1), causal.narrow(0, 0, length).narrow(1, 0, length));
    return head(norm(x.transpose(0, 1)));
  }
  torch::nn::Embedding token, position;
  torch::nn::TransformerEncoder encoder;
  torch::nn::LayerNorm norm;
  torch::nn::Linear head;
  torch::Tensor causal;
};
TORCH_MODULE(CharTransformer);

// Sequences of context+1 characters starting at `starts`.
torch::Tensor Windows(const torch::Tensor& text, const torch::Tensor& starts, int context) {
  return text.index_select(0, (starts.unsqueeze(1) + torch::arange(context + 1)).reshape({-1}))
      .reshape({starts.size(0), context + 1});
}

torch::Tensor NextCharacterLoss(CharTransformer& model, const torch::Tensor& windows,
                                torch::nn::functional::CrossEntropyFuncOptions options = {}) {
  const int64_t context = windows.size(1) - 1;
  torch::Tensor logits = model->forward(windows.narrow(1, 0, context));
  return torch::nn::functional::cross_entropy(logits.reshape({-1, kVocabulary}),
                                              windows.narrow(1, 1, context).reshape({-1}), options);
}

// Mean loss per character on held-out windows, this rank's share summed over the group.
double HeldOutLoss(CharTransformer& model, const torch::Tensor& held_out, int context, int windows,
                   TrainingRun& run) {
  torch::NoGradGuard no_grad;
  double loss = 0, characters = 0;
  const int64_t stride = (held_out.size(0) - context - 1) / windows;
  const auto [shard, shards] = run.evaluation_share();
  for (int w = shard; w < windows; w += shards) {
    torch::Tensor starts = torch::full({1}, w * stride, torch::kLong);
    loss +=
        NextCharacterLoss(model, Windows(held_out, starts, context),
                          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    characters += context;
  }
  const std::vector<double> sums = run.SumOverRanks({loss, characters});
  return sums[0] / sums[1];
}

int Main() {
  // The data first, as train_cv does: a rank joins the group only once it is ready to train.
  const at::Tensor corpus = ValueOrThrow(LoadFortunes(absl::GetFlag(FLAGS_corpus_dir)));
  std::unique_ptr<TrainingRun> run = StartFromFlags("train_nlp", absl::GetFlag(FLAGS_batch));
  // The last 5% is held out for perplexity.
  const int64_t split = corpus.size(0) * 95 / 100;
  const torch::Tensor train = corpus.narrow(0, 0, split);
  const torch::Tensor held_out = corpus.narrow(0, split, corpus.size(0) - split);
  const int context = absl::GetFlag(FLAGS_context);
  const int batch = absl::GetFlag(FLAGS_batch);
  const int64_t local_batch = run->LocalBatch(batch);

  torch::manual_seed(absl::GetFlag(FLAGS_seed));
  CharTransformer model(context);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(absl::GetFlag(FLAGS_lr)));
  run->Attach(*model, adam);
  if (run->rank() == 0) {
    int64_t parameters = 0;
    for (const auto& p : model->parameters()) parameters += p.numel();
    std::printf(
        "train_nlp: %d rank(s), sync %s, %lld characters of fortunes (%lld held out), "
        "%lld parameters, global batch %d x %d characters\n",
        run->world(), run->sync().c_str(), static_cast<long long>(corpus.size(0)),
        static_cast<long long>(held_out.size(0)), static_cast<long long>(parameters), batch,
        context);
  }
  run->Train(
      absl::GetFlag(FLAGS_epochs),
      static_cast<int64_t>(absl::GetFlag(FLAGS_steps_per_epoch)) * batch, local_batch,
      [&](int epoch, int64_t slot) {
        // Local batch `slot` of the epoch: the same windows whichever rank draws it.
        torch::manual_seed(absl::GetFlag(FLAGS_seed) * 7919 + epoch * 1000003 + slot);
        torch::Tensor starts = torch::randint(split - context - 1, {local_batch}, torch::kLong);
        torch::Tensor loss = NextCharacterLoss(model, Windows(train, starts, context));
        loss.backward();
        return loss.item<double>();
      },
      [&]() -> TrainingRun::Metrics {
        const double held_out_loss =
            HeldOutLoss(model, held_out, context, absl::GetFlag(FLAGS_eval_windows), *run);
        return {{"test_loss", held_out_loss},
                {"perplexity", std::exp(held_out_loss)},
                {"bits_per_char", held_out_loss / std::log(2.0)}};
      });
  return 0;
}

}  // namespace
}  // namespace hmc::examples

int main(int argc, char** argv) {
  // A run of 450 steps leaves DiLoCo few syncs: more of them, with less outer momentum to
  // compound over them, came within 5% of ddp's perplexity where H = 50 was 12-18% behind
  // (perf/RESULTS.md, "train_nlp on loopback").
  return hmc::examples::RunExample(
      argc, argv, "train_nlp",
      "Trains a character-level transformer on Debian's fortunes, alone or under hmcrun.",
      hmc::examples::Main, {.inner_steps = 10, .outer_lr = 0.7, .outer_momentum = 0.5});
}
