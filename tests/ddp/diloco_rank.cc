// hmc-test-ddp's DiLoCo modes (see ddp_rank.cc for how they are started):
//   diloco         every rank runs Adam for kInner steps on its shard, then the group takes an
//                  outer Nesterov step; the parameters equal kWorld replicas simulated in this
//                  process with plain tensor arithmetic, and the loss falls
//   diloco-stream  streaming DiLoCo, three fragments, int8 pseudo-gradients: at the end every rank
//                  holds the same outer parameters, each fragment synced at its steps, the loss
//                  falls
//   diloco-survive fault tolerant: the last rank dies before the second sync; the survivors match
//                  the simulation whose later syncs average the live replicas only
//   diloco-rejoin  fault tolerant: the last rank dies, a replacement joins, downloads the outer
//                  parameters and momentum, and every rank ends with the same bits
//   diloco-restore rank 0 saves a DiLoCo two steps past its first sync; a second DiLoCo over
//                  other parameters restores it on every rank and syncs where the first would
//                  have; a checkpoint of another model is refused on every rank, and the group
//                  goes on
#include <signal.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <functional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "ddp/diloco.h"
#include "tests/ddp/ddp_rank_util.h"

namespace hmc::ddp {
namespace {

constexpr int kInner = 5;  // kSteps / kInner syncs.
constexpr double kInnerLr = 0.01;

// The batch of replica `id` at its inner step `t` (0-based).
torch::Tensor Rows(const torch::Tensor& t, int64_t step, int world, int id) {
  return t.narrow(0, (step * world + id) * kBatch, kBatch);
}

// DiLoCo by hand: `world` replicas with their own Adam; after every kInner steps the mean of
// (outer - local) over the replicas alive at that sync drives SGD with Nesterov momentum
// (v = μv + g; θ -= lr(g + μv)), and every replica restarts from the new outer parameters.
std::vector<torch::Tensor> SimulateDiLoCo(const Data& d, int world,
                                          const std::function<int(int sync)>& live) {
  const DiLoCoOptions defaults;
  std::vector<torch::nn::Sequential> replicas;
  std::vector<std::unique_ptr<torch::optim::Adam>> adams;
  for (int r = 0; r < world; ++r) {
    replicas.push_back(MakeModel());
    adams.push_back(std::make_unique<torch::optim::Adam>(replicas.back()->parameters(),
                                                         torch::optim::AdamOptions(kInnerLr)));
  }
  std::vector<torch::Tensor> outer, momentum;
  for (auto& p : replicas[0]->parameters()) {
    outer.push_back(p.detach().clone());
    momentum.push_back(torch::zeros_like(p));
  }
  for (int sync = 0; sync < kSteps / kInner; ++sync) {
    const int alive = live(sync);
    for (int r = 0; r < alive; ++r) {
      for (int t = sync * kInner; t < (sync + 1) * kInner; ++t) {
        adams[r]->zero_grad();
        Loss(replicas[r], Rows(d.x, t, world, r), Rows(d.y, t, world, r)).backward();
        adams[r]->step();
      }
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < outer.size(); ++i) {
      torch::Tensor g = torch::zeros_like(outer[i]);
      for (int r = 0; r < alive; ++r) g += outer[i] - replicas[r]->parameters()[i];
      g /= alive;
      momentum[i] = momentum[i] * defaults.outer_momentum + g;
      outer[i] = outer[i] - defaults.outer_lr * (g + defaults.outer_momentum * momentum[i]);
      for (int r = 0; r < world; ++r) replicas[r]->parameters()[i].copy_(outer[i]);
    }
  }
  return outer;
}

std::vector<torch::Tensor> Parameters(torch::nn::Sequential& model) {
  std::vector<torch::Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p.detach().clone());
  return params;
}

// Whether every rank holds these bits.
bool SameOnEveryRank(Communicator& comm, const at::Tensor& t) {
  int64_t mine = static_cast<int64_t>(HashTensors({{"t", t}}));
  std::vector<int64_t> all(comm.size());
  Buffer in{&mine, 1, DType::kI64}, out{all.data(), all.size(), DType::kI64};
  if (!comm.AllGather(in, out)->Wait().ok()) return false;
  return std::all_of(all.begin(), all.end(), [&](int64_t h) { return h == mine; });
}

}  // namespace

int RunDiLoCo(std::shared_ptr<Communicator> comm) {
  const int world = comm->size(), rank = comm->rank();
  const Data d = MakeData(kSteps * world * kBatch);
  auto model = MakeModel();
  const double loss_before = FullLoss(model, d);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(kInnerLr));
  // Exact pseudo-gradients, so that the simulation is a reference to a float's rounding.
  DiLoCo diloco(
      comm, model->parameters(),
      {.inner_steps = kInner, .averaging = {.codec_inter = "none", .codec_intra = "none"}});
  int syncs = 0;
  for (int t = 0; t < kSteps; ++t) {
    adam.zero_grad();
    Loss(model, Rows(d.x, t, world, rank), Rows(d.y, t, world, rank)).backward();
    adam.step();
    syncs += diloco.AfterInnerStep(kBatch);
  }
  const double diff =
      MaxDifference(Parameters(model), SimulateDiLoCo(d, world, [&](int) { return world; }));
  const double loss_after = FullLoss(model, d);
  std::printf("rank %d: %d syncs, %llu calls, max |param - simulation| = %.3g, loss %.4f -> %.4f\n",
              rank, syncs, static_cast<unsigned long long>(diloco.traffic().calls), diff,
              loss_before, loss_after);
  EXPECT_OR_FAIL(syncs == kSteps / kInner && diloco.outer_steps() == syncs, "%d syncs", syncs);
  EXPECT_OR_FAIL(diloco.traffic().calls == static_cast<uint64_t>(syncs), "one average per sync");
  EXPECT_OR_FAIL(diff < 1e-5, "parameters differ from the simulation by %g", diff);
  EXPECT_OR_FAIL(loss_after < 0.9 * loss_before, "the loss did not fall: %f -> %f", loss_before,
                 loss_after);
  return 0;
}

int RunDiLoCoStreaming(std::shared_ptr<Communicator> comm) {
  constexpr int kFragments = 3;
  const int world = comm->size(), rank = comm->rank();
  const Data d = MakeData(kSteps * world * kBatch);
  auto model = MakeModel();
  const double loss_before = FullLoss(model, d);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(kInnerLr));
  DiLoCo diloco(comm, model->parameters(), {.inner_steps = kInner, .fragments = kFragments});
  for (int t = 0; t < kSteps; ++t) {
    adam.zero_grad();
    Loss(model, Rows(d.x, t, world, rank), Rows(d.y, t, world, rank)).backward();
    adam.step();
    diloco.AfterInnerStep(kBatch);
  }
  diloco.Finish();
  // Each rank applied each average at its own step, but to the same outer values.
  EXPECT_OR_FAIL(SameOnEveryRank(*comm, diloco.outer_parameters()),
                 "ranks disagree on the outer parameters");
  // Fragment f syncs at steps t (1-based) with (t + ⌊kInner f / kFragments⌋) % kInner == 0.
  int expected = 0;
  for (int f = 0; f < kFragments; ++f) {
    for (int t = 1; t <= kSteps; ++t) expected += (t + kInner * f / kFragments) % kInner == 0;
  }
  const double loss_after = FullLoss(model, d);
  std::printf("rank %d: %lld fragment syncs (expected %d), %llu calls, loss %.4f -> %.4f\n", rank,
              static_cast<long long>(diloco.outer_steps()), expected,
              static_cast<unsigned long long>(diloco.traffic().calls), loss_before, loss_after);
  EXPECT_OR_FAIL(diloco.outer_steps() == expected, "%lld fragment syncs",
                 static_cast<long long>(diloco.outer_steps()));
  EXPECT_OR_FAIL(diloco.traffic().calls == static_cast<uint64_t>(expected), "one call per sync");
  EXPECT_OR_FAIL(loss_after < 0.9 * loss_before, "the loss did not fall: %f -> %f", loss_before,
                 loss_after);
  return 0;
}

int RunDiLoCoRestore(std::shared_ptr<Communicator> comm) {
  const int world = comm->size(), rank = comm->rank();
  const Data d = MakeData(kSteps * world * kBatch);
  const DiLoCoOptions options{.inner_steps = kInner,
                              .averaging = {.codec_inter = "none", .codec_intra = "none"}};
  auto model = MakeModel();
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(kInnerLr));
  auto train = [&](DiLoCo& diloco, int t) {
    adam.zero_grad();
    Loss(model, Rows(d.x, t, world, rank), Rows(d.y, t, world, rank)).backward();
    adam.step();
    return diloco.AfterInnerStep(kBatch);
  };
  std::stringstream saved;
  at::Tensor outer_saved;
  {
    DiLoCo first(comm, model->parameters(), options);
    for (int t = 0; t < kInner + 2; ++t) train(first, t);
    outer_saved = first.outer_parameters().clone();
    torch::serialize::OutputArchive archive;
    first.Save(archive);
    archive.save_to(saved);
  }
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.add_(1.0);  // Unlike the saved outer parameters.
  }
  DiLoCo second(comm, model->parameters(), options);
  torch::serialize::InputArchive archive;
  if (rank == 0) archive.load_from(saved);
  second.Restore(rank == 0 ? &archive : nullptr);
  EXPECT_OR_FAIL(second.outer_parameters().equal(outer_saved) &&
                     SameOnEveryRank(*comm, second.outer_parameters()),
                 "the restored outer parameters are not the saved ones on every rank");
  EXPECT_OR_FAIL(second.inner_steps() == kInner + 2 && second.outer_steps() == 1,
                 "restored at inner step %lld, outer step %lld",
                 static_cast<long long>(second.inner_steps()),
                 static_cast<long long>(second.outer_steps()));
  // The next sync falls where the first DiLoCo's would have: at inner step 2·kInner.
  for (int t = kInner + 2; t < 2 * kInner; ++t) {
    const bool synced = train(second, t);
    EXPECT_OR_FAIL(synced == (t + 1 == 2 * kInner), "step %d synced: %d", t + 1, synced);
  }

  // Rank 0's checkpoint of a smaller model: every rank refuses it, no rank waits.
  DiLoCo third(comm, model->parameters(), options);
  torch::serialize::InputArchive other;
  if (rank == 0) {
    torch::serialize::OutputArchive small;
    small.write("outer", torch::zeros({3}));
    small.write("momentum", torch::zeros({3}));
    small.write("steps", torch::zeros({2}, torch::kLong));
    std::stringstream bytes;
    small.save_to(bytes);
    other.load_from(bytes);
  }
  std::string refusal;
  try {
    third.Restore(rank == 0 ? &other : nullptr);
  } catch (const c10::Error& e) {
    refusal = e.what_without_backtrace();
  }
  std::printf("rank %d: %s\n", rank, refusal.c_str());
  EXPECT_OR_FAIL(absl::StrContains(refusal, "rank 0's checkpoint does not fit this model"),
                 "refusal: '%s'", refusal.c_str());
  EXPECT_OR_FAIL(rank != 0 || absl::StrContains(refusal, "it holds 3 outer parameters"),
                 "rank 0's refusal does not name the sizes: '%s'", refusal.c_str());
  EXPECT_OR_FAIL(comm->Barrier()->Wait().ok(), "the group did not go on");
  return 0;
}

int RunDiLoCoSurvive(std::shared_ptr<Communicator> comm) {
  constexpr int kKillAtSync = 1;
  const int world = comm->size(), id = comm->id();
  const Data d = MakeData(kSteps * world * kBatch);
  auto model = MakeModel();
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(kInnerLr));
  DiLoCo diloco(comm, model->parameters(),
                {.inner_steps = kInner,
                 .averaging = {.codec_inter = "none", .codec_intra = "none"},
                 .fault_tolerant = true});
  for (int t = 0; t < kSteps; ++t) {
    adam.zero_grad();
    Loss(model, Rows(d.x, t, world, id), Rows(d.y, t, world, id)).backward();
    adam.step();
    const int sync = t / kInner;
    if (id == world - 1 && sync == kKillAtSync && (t + 1) % kInner == 0) raise(SIGKILL);
    if (!diloco.AfterInnerStep(kBatch)) continue;
    const int expected = sync < kKillAtSync ? world : world - 1;
    EXPECT_OR_FAIL(static_cast<int>(diloco.last_sync().contributors.size()) == expected,
                   "sync %d averaged %zu ranks, expected %d", sync,
                   diloco.last_sync().contributors.size(), expected);
  }
  const double diff = MaxDifference(Parameters(model), SimulateDiLoCo(d, world, [&](int sync) {
                                      return sync < kKillAtSync ? world : world - 1;
                                    }));
  std::printf("rank %d: %d ranks left, %lld syncs, %lld skipped, max |param - simulation| = %.3g\n",
              id, comm->size(), static_cast<long long>(diloco.outer_steps()),
              static_cast<long long>(diloco.skipped_syncs()), diff);
  EXPECT_OR_FAIL(comm->size() == world - 1, "%d ranks left", comm->size());
  EXPECT_OR_FAIL(diloco.outer_steps() == kSteps / kInner && diloco.skipped_syncs() == 0,
                 "%lld syncs", static_cast<long long>(diloco.outer_steps()));
  EXPECT_OR_FAIL(diff < 1e-5, "parameters differ from the simulation by %g", diff);
  return 0;
}

// As RunRejoin (ddp_rank.cc) for fault-tolerant DiLoCo with two inner steps per sync: the last
// rank dies before sync 3, a replacement joins; they stop once kMinSyncs syncs are done and the
// last kFullSyncs had all three ranks.
int RunDiLoCoRejoin(std::shared_ptr<Communicator> comm) {
  constexpr int kKillAt = 3, kMinSyncs = 12, kFullSyncs = 3, kMaxSteps = 3000, kWorld = 3;
  const int id = comm->id();
  const bool joiner = comm->joined_running_group();
  const Data d = MakeData(kMaxSteps * kBatch);
  auto model = MakeRejoinModel(joiner);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(kInnerLr));
  DiLoCo diloco(comm, model->parameters(),
                {.inner_steps = 2,
                 .averaging = {.codec_inter = "none", .codec_intra = "none"},
                 .fault_tolerant = true});
  int full = 0;
  bool downloaded = false;
  for (int t = 0; t < kMaxSteps; ++t) {
    const int64_t begin = ((t * 7 + id) % (kMaxSteps - 1)) * kBatch;
    adam.zero_grad();
    Loss(model, d.x.narrow(0, begin, kBatch), d.y.narrow(0, begin, kBatch)).backward();
    adam.step();
    if (id == kWorld - 1 && !joiner && diloco.outer_steps() == kKillAt && t % 2 == 1) {
      raise(SIGKILL);
    }
    if (!diloco.AfterInnerStep(kBatch)) continue;
    const AverageOutcome& o = diloco.last_sync();
    if (joiner && !downloaded) {
      downloaded = o.state_download.bytes > 0;
      const auto me = std::find(o.contributors.begin(), o.contributors.end(), id);
      EXPECT_OR_FAIL(me != o.contributors.end() && o.weights[me - o.contributors.begin()] == 0,
                     "the joiner's first sync should count its pseudo-gradient for nothing");
    }
    full = static_cast<int>(o.contributors.size()) == kWorld ? full + 1 : 0;
    if (diloco.outer_steps() >= kMinSyncs && full >= kFullSyncs) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  NamedTensors held = {{"outer", diloco.outer_parameters()}};
  for (auto& p : model->parameters()) held.emplace_back("parameter", p);
  std::printf("final id=%d joiner=%d step=%lld hash=%llu\n", id, joiner ? 1 : 0,
              static_cast<long long>(diloco.outer_steps()),
              static_cast<unsigned long long>(HashTensors(held)));
  EXPECT_OR_FAIL(!joiner || downloaded, "the joiner never downloaded the state");
  return 0;
}

}  // namespace hmc::ddp
