// hmc-test-ddp: one rank of the libtorch integration tests, started by ddp_test.cc through a
// local group. Every mode checks its results against a reference computed in-process without
// communication and exits 0 (pass), 3 (wrong result) or 1 (error).
//   ddp       DDP helper: parameters after training equal one process on the union of batches;
//             the loss falls
//   reducer   libtorch's c10d::Reducer over ProcessGroupHmc with the hmc comm hook matches the
//             helper and the reference
//   pg        the process group's collectives against values computed locally
//   collab    collaborative optimizer: steps once the group's samples reach the target, with the
//             sample-weighted average (--delay: delayed parameter updates)
//   mismatch  rank 1's model differs: every rank gets an error naming it, none hangs
//   survive   fault-tolerant DDP helper: the last rank kills itself (SIGKILL) in step 5; the
//             others' parameters equal one process on the union of the live ranks' batches
//   rejoin    fault-tolerant DDP helper with Adam: the last rank kills itself in step 5, a
//             replacement (the same mode, started later) joins, downloads parameters, Adam's
//             moments and the step count, and trains on; prints a hash of what it holds
//   reducer-rejoin  the same through libtorch's Reducer with the fault-tolerant hook
//   collab-rejoin  the same with the fault-tolerant collaborative optimizer
//   diloco, diloco-stream, diloco-survive, diloco-rejoin, diloco-restore  DiLoCo (diloco_rank.cc)
#include <signal.h>
#include <torch/nn.h>
#include <torch/optim.h>

#include <cstdio>
#include <string>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "collectives/communicator.h"
#include "core/fnv.h"
#include "ddp/averaging_hook.h"
#include "ddp/collaborative_optimizer.h"
#include "ddp/distributed_data_parallel.h"
#include "ddp/hmc_reducer.h"
#include "ddp/optimizer_state.h"
#include "ddp/process_group.h"
#include "tests/ddp/ddp_rank_util.h"

namespace hmc::ddp {
namespace {

// One process on the union of every rank's batches: the reference for data parallelism.
std::vector<torch::Tensor> TrainReference(const Data& d, int world) {
  auto model = MakeModel();
  torch::optim::SGD sgd(model->parameters(), 0.2);
  for (int s = 0; s < kSteps; ++s) {
    const int64_t begin = s * world * kBatch;
    sgd.zero_grad();
    Loss(model, d.x.narrow(0, begin, world * kBatch), d.y.narrow(0, begin, world * kBatch))
        .backward();
    sgd.step();
  }
  std::vector<torch::Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p.detach().clone());
  return params;
}

// Trains this rank's share of each step's batch; `sync` averages the gradients after backward.
template <typename Backward>
std::vector<torch::Tensor> TrainShard(torch::nn::Sequential& model, const Data& d, int rank,
                                      int world, Backward&& backward, double* first_loss,
                                      double* last_loss) {
  torch::optim::SGD sgd(model->parameters(), 0.2);
  for (int s = 0; s < kSteps; ++s) {
    const int64_t begin = (s * world + rank) * kBatch;
    sgd.zero_grad();
    torch::Tensor loss = Loss(model, d.x.narrow(0, begin, kBatch), d.y.narrow(0, begin, kBatch));
    if (s == 0) *first_loss = loss.item<double>();
    *last_loss = loss.item<double>();
    backward(loss);
    sgd.step();
  }
  std::vector<torch::Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p.detach().clone());
  return params;
}

int RunDdp(std::shared_ptr<Communicator> comm) {
  const Data d = MakeData(kSteps * comm->size() * kBatch);
  auto model = MakeModel();
  const double loss_before = FullLoss(model, d);
  // Small buckets: three of them, so averaging overlaps backward.
  DistributedDataParallel ddp(comm, model->parameters(), {.bucket_bytes = 512});
  double first = 0, last = 0;
  auto params = TrainShard(
      model, d, comm->rank(), comm->size(),
      [&](torch::Tensor& loss) {
        loss.backward();
        ddp.FinishBackward();
      },
      &first, &last);
  const double diff = MaxDifference(params, TrainReference(d, comm->size()));
  std::printf(
      "rank %d: %zu buckets, max |param - reference| = %.3g, loss %.4f -> %.4f, %llu "
      "calls\n",
      comm->rank(), ddp.bucket_count(), diff, first, last,
      static_cast<unsigned long long>(ddp.traffic().calls));
  const double loss_after = FullLoss(model, d);
  EXPECT_OR_FAIL(loss_after < 0.9 * loss_before, "the loss over the data did not fall: %f -> %f",
                 loss_before, loss_after);
  EXPECT_OR_FAIL(ddp.bucket_count() >= 2, "expected several buckets");
  EXPECT_OR_FAIL(diff < 2e-5, "parameters differ from the reference by %g", diff);
  EXPECT_OR_FAIL(ddp.traffic().calls == static_cast<uint64_t>(kSteps * ddp.bucket_count()),
                 "one average per bucket and step");
  return 0;
}

// The fault-tolerant helper loses the last rank in the middle of training: it dies after its
// backward of step kKillAt, before averaging. Every survivor must step with the average over the
// live ranks' samples: before kKillAt all of them, from it on the survivors alone. Shards are by
// stable id (ranks are renumbered when one is lost).
int RunSurvive(std::shared_ptr<Communicator> comm) {
  constexpr int kKillAt = 5;
  const int world = comm->size();
  const int victim = world - 1;
  const int id = comm->id();
  const Data d = MakeData(kSteps * world * kBatch);
  auto model = MakeModel();
  DistributedDataParallel ddp(comm, model->parameters(),
                              {.bucket_bytes = 512, .fault_tolerant = true});
  ddp.set_samples(kBatch);
  torch::optim::SGD sgd(model->parameters(), 0.2);
  for (int s = 0; s < kSteps; ++s) {
    const int64_t begin = (s * world + id) * kBatch;
    sgd.zero_grad();
    // Before backward, whose buckets may commit the step's round before FinishBackward: the
    // survivors' round of this step meets the loss.
    if (id == victim && s == kKillAt) raise(SIGKILL);
    Loss(model, d.x.narrow(0, begin, kBatch), d.y.narrow(0, begin, kBatch)).backward();
    ddp.FinishBackward();
    const int expected = s < kKillAt ? world : world - 1;
    EXPECT_OR_FAIL(static_cast<int>(ddp.last_step().contributors.size()) == expected,
                   "step %d averaged %zu ranks, expected %d", s,
                   ddp.last_step().contributors.size(), expected);
    EXPECT_OR_FAIL(ddp.last_step().total_weight == expected * kBatch, "step %d: total weight %g", s,
                   ddp.last_step().total_weight);
    sgd.step();
  }
  // The reference: one process on the union of the live ranks' batches of each step.
  auto reference = MakeModel();
  torch::optim::SGD ref_sgd(reference->parameters(), 0.2);
  for (int s = 0; s < kSteps; ++s) {
    const int live = s < kKillAt ? world : world - 1;  // The victim is the last shard.
    ref_sgd.zero_grad();
    Loss(reference, d.x.narrow(0, s * world * kBatch, live * kBatch),
         d.y.narrow(0, s * world * kBatch, live * kBatch))
        .backward();
    ref_sgd.step();
  }
  std::vector<torch::Tensor> params, expected;
  for (auto& p : model->parameters()) params.push_back(p.detach().clone());
  for (auto& p : reference->parameters()) expected.push_back(p.detach().clone());
  const double diff = MaxDifference(params, expected);
  std::printf("rank %d: epoch %u, %zu ranks left, max |param - reference| = %.3g\n", id,
              comm->epoch(), static_cast<size_t>(comm->size()), diff);
  EXPECT_OR_FAIL(comm->size() == world - 1, "%d ranks left", comm->size());
  EXPECT_OR_FAIL(diff < 2e-5, "parameters differ from the reference by %g", diff);
  return 0;
}

// Fault-tolerant training, one step at a time, through the DDP helper or through libtorch's
// Reducer with the fault-tolerant hook.
class FaultTolerantTrainer {
 public:
  FaultTolerantTrainer(std::shared_ptr<Communicator> comm, torch::nn::Sequential& model,
                       const NamedTensors& optimizer_state, bool through_reducer)
      : model_(model) {
    if (through_reducer) {
      reducer_ = MakeReducer(comm, model->parameters(), 512, {}, /*fault_tolerant=*/true);
      reducer_.fault_tolerant_hook->ShareState(optimizer_state);
    } else {
      ddp_ = std::make_unique<DistributedDataParallel>(
          comm, model->parameters(), DdpOptions{.bucket_bytes = 512, .fault_tolerant = true});
      ddp_->ShareState(optimizer_state);
    }
  }
  // Backward and averaging of one step weighted by `samples`; throws c10::Error saying
  // "membership changed" when the group gave the step up.
  void Step(const torch::Tensor& x, const torch::Tensor& y, double samples) {
    if (ddp_ != nullptr) {
      ddp_->set_samples(samples);
      Loss(model_, x, y).backward();
      ddp_->FinishBackward();
      return;
    }
    reducer_.fault_tolerant_hook->set_samples(samples);
    reducer_.reducer->prepare_for_forward();
    torch::Tensor loss = Loss(model_, x, y);
    reducer_.reducer->prepare_for_backward({});
    loss.backward();
  }
  int64_t step() const {
    return ddp_ != nullptr ? ddp_->step() : reducer_.fault_tolerant_hook->step();
  }
  bool state_stale() const {
    return ddp_ != nullptr ? ddp_->state_stale() : reducer_.fault_tolerant_hook->state_stale();
  }
  const AverageOutcome& last_step() const {
    return ddp_ != nullptr ? ddp_->last_step() : reducer_.fault_tolerant_hook->last_step();
  }

 private:
  torch::nn::Sequential& model_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  HmcReducer reducer_;
};

// The group trains until it has taken kMinSteps steps and the last kFullSteps had every rank of
// the original size (the replacement took part), at most kMaxSteps. Each rank prints what it
// holds at the end; ddp_test.cc compares them across ranks.
int RunRejoin(std::shared_ptr<Communicator> comm, bool through_reducer) {
  constexpr int kKillAt = 5, kMinSteps = 30, kMaxSteps = 3000, kFullSteps = 5;
  constexpr int kWorld = 3;  // ddp_test.cc starts three, then one replacement.
  const int id = comm->id();
  const bool joiner = comm->joined_running_group();
  const Data d = MakeData(kMaxSteps * kBatch);
  auto model = MakeRejoinModel(joiner);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.01));
  const NamedTensors optimizer_state = MaterializeOptimizerState(adam);
  FaultTolerantTrainer trainer(comm, model, optimizer_state, through_reducer);
  int first_step = -1;
  int full_steps = 0;  // Steps in a row that every rank of kWorld took part in.
  for (int taken = 0; taken < kMaxSteps; ++taken) {
    const int64_t begin = ((trainer.step() * 7 + id) % (kMaxSteps - 1)) * kBatch;
    adam.zero_grad();
    if (id == kWorld - 1 && trainer.step() == kKillAt) raise(SIGKILL);
    const bool stale = trainer.state_stale();
    try {
      trainer.Step(d.x.narrow(0, begin, kBatch), d.y.narrow(0, begin, kBatch), kBatch);
    } catch (const c10::Error& e) {
      if (!absl::StrContains(e.what(), "membership changed")) throw;
      continue;  // Given up on every rank alike: nobody steps.
    }
    const AverageOutcome& o = trainer.last_step();
    if (stale) {
      first_step = static_cast<int>(trainer.step()) - 1;
      const auto me = std::find(o.contributors.begin(), o.contributors.end(), id);
      EXPECT_OR_FAIL(me != o.contributors.end() && o.weights[me - o.contributors.begin()] == 0,
                     "the joiner's first step should count its gradients for nothing");
      EXPECT_OR_FAIL(o.state_download.bytes > 0, "the joiner downloaded nothing");
      std::printf("joiner %d: downloaded %llu bytes in %d parts at step %d\n", id,
                  static_cast<unsigned long long>(o.state_download.bytes),
                  o.state_download.parts_downloaded, first_step);
    }
    SetOptimizerSteps(adam, trainer.step() - 1);  // Adam counts the step it is about to take.
    adam.step();
    // The same on every rank: last_step is the committed outcome.
    full_steps = static_cast<int>(o.contributors.size()) == kWorld ? full_steps + 1 : 0;
    if (trainer.step() >= kMinSteps && full_steps >= kFullSteps) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  NamedTensors held = optimizer_state;
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    held.emplace_back("parameter", model->parameters()[i]);
  }
  std::printf("final id=%d joiner=%d step=%lld hash=%llu\n", id, joiner ? 1 : 0,
              static_cast<long long>(trainer.step()),
              static_cast<unsigned long long>(HashTensors(held)));
  EXPECT_OR_FAIL(!joiner || first_step >= kKillAt, "the joiner never downloaded the state");
  return 0;
}

// RunRejoin's story with the fault-tolerant collaborative optimizer: rounds of three peers'
// samples, the last peer dies in round 4, a replacement joins; they stop once kMinRounds rounds are
// done and the last kFullRounds had three peers.
int RunCollabRejoin(std::shared_ptr<Communicator> comm) {
  constexpr int kKillAt = 4, kMinRounds = 20, kFullRounds = 3, kDataBatches = 4000, kPeers = 3;
  const int id = comm->id();
  const bool joiner = comm->joined_running_group();
  const Data d = MakeData(kDataBatches * kBatch);
  auto model = MakeRejoinModel(joiner);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.01));
  CollaborativeOptimizer collab(comm, model->parameters(), adam,
                                {.target_batch_size = 4 * kPeers * kBatch,
                                 .progress_interval = absl::Milliseconds(5),
                                 .fault_tolerant = true});
  int full_rounds = 0;
  // Peers take different numbers of batches per round, so only the group's rounds may end the
  // loop (a peer that stopped after its own count of batches would leave the others in a
  // round). The pause keeps the survivors training until the replacement, which may take a
  // while to start on a loaded machine, has joined; the deadline only bounds a failing run.
  const absl::Time give_up = absl::Now() + absl::Seconds(90);
  for (int b = 0; absl::Now() < give_up; ++b) {
    const int64_t begin = ((b * 7 + id * 13) % (kDataBatches - 1)) * kBatch;
    adam.zero_grad();
    Loss(model, d.x.narrow(0, begin, kBatch), d.y.narrow(0, begin, kBatch)).backward();
    if (id == kPeers - 1 && collab.rounds() == kKillAt) raise(SIGKILL);
    absl::SleepFor(absl::Milliseconds(2));
    if (!collab.Step(kBatch)) continue;
    // The same on every peer: the committed round's.
    full_rounds = collab.last_round_peers() == kPeers ? full_rounds + 1 : 0;
    if (collab.rounds() >= kMinRounds && full_rounds >= kFullRounds) break;
  }
  NamedTensors held = MaterializeOptimizerState(adam);
  for (auto& p : model->parameters()) held.emplace_back("parameter", p);
  std::printf("final id=%d joiner=%d step=%lld hash=%llu\n", id, joiner ? 1 : 0,
              static_cast<long long>(collab.rounds()),
              static_cast<unsigned long long>(HashTensors(held)));
  return 0;
}

int RunReducer(std::shared_ptr<Communicator> comm) {
  const Data d = MakeData(kSteps * comm->size() * kBatch);
  auto model = MakeModel();
  torch::optim::SGD sgd(model->parameters(), 0.2);
  const size_t bucket_bytes = 512;
  HmcReducer made = MakeReducer(comm, model->parameters(), bucket_bytes);
  c10d::Reducer& reducer = *made.reducer;
  double first = 0, last = 0;
  auto through_reducer = TrainShard(
      model, d, comm->rank(), comm->size(),
      [&](torch::Tensor& loss) {
        reducer.prepare_for_forward();
        reducer.prepare_for_backward({});
        loss.backward();
      },
      &first, &last);
  auto helper_model = MakeModel();
  DistributedDataParallel ddp(comm, helper_model->parameters(), {.bucket_bytes = bucket_bytes});
  auto through_helper = TrainShard(
      helper_model, d, comm->rank(), comm->size(),
      [&](torch::Tensor& loss) {
        loss.backward();
        ddp.FinishBackward();
      },
      &first, &last);
  const double vs_helper = MaxDifference(through_reducer, through_helper);
  const double vs_reference = MaxDifference(through_reducer, TrainReference(d, comm->size()));
  std::printf(
      "rank %d: %zu reducer buckets, hook calls %llu; max |reducer - helper| = %.3g, "
      "|reducer - reference| = %.3g\n",
      comm->rank(), made.buckets, static_cast<unsigned long long>(made.hook->traffic().calls),
      vs_helper, vs_reference);
  EXPECT_OR_FAIL(made.hook->traffic().calls >= static_cast<uint64_t>(kSteps),
                 "the hook averaged every step");
  EXPECT_OR_FAIL(vs_helper < 2e-5 && vs_reference < 2e-5, "reducer result differs");
  return 0;
}

int RunProcessGroup(std::shared_ptr<Communicator> comm) {
  auto group = c10::make_intrusive<ProcessGroupHmc>(comm);
  const int rank = comm->rank(), world = comm->size();
  auto mine = [&](int r) { return torch::arange(5, torch::kFloat) * (r + 1) + r; };
  torch::Tensor sum = torch::zeros({5}), max = torch::full({5}, -1e9);
  for (int r = 0; r < world; ++r) {
    sum += mine(r);
    max = torch::maximum(max, mine(r));
  }
  std::vector<at::Tensor> t = {mine(rank)};
  group->allreduce(t)->wait();
  EXPECT_OR_FAIL(torch::allclose(t[0], sum), "allreduce sum");
  t = {mine(rank)};
  c10d::AllreduceOptions max_op;
  max_op.reduceOp = c10d::ReduceOp::MAX;
  group->allreduce(t, max_op)->wait();
  EXPECT_OR_FAIL(torch::equal(t[0], max), "allreduce max");
  std::vector<at::Tensor> several = {mine(rank).reshape({5, 1}), mine(rank) * 2};
  group->allreduce_coalesced(several)->wait();
  EXPECT_OR_FAIL(
      torch::allclose(several[0].reshape({5}), sum) && torch::allclose(several[1], sum * 2),
      "allreduce_coalesced");
  t = {mine(rank)};
  c10d::BroadcastOptions from_last;
  from_last.rootRank = world - 1;
  group->broadcast(t, from_last)->wait();
  EXPECT_OR_FAIL(torch::equal(t[0], mine(world - 1)), "broadcast");
  std::vector<std::vector<at::Tensor>> gathered(1);
  for (int r = 0; r < world; ++r) gathered[0].push_back(torch::empty({5}));
  std::vector<at::Tensor> in = {mine(rank)};
  auto work = group->allgather(gathered, in);
  work->wait();
  for (int r = 0; r < world; ++r) {
    EXPECT_OR_FAIL(torch::equal(gathered[0][r], mine(r)), "allgather block %d", r);
  }
  EXPECT_OR_FAIL(work->getFuture()->completed() && work->isSuccess(), "future completed");
  std::vector<std::vector<at::Tensor>> scatter_in(1);
  for (int r = 0; r < world; ++r) scatter_in[0].push_back(mine(rank) + r);
  std::vector<at::Tensor> scatter_out = {torch::empty({5})};
  group->reduce_scatter(scatter_out, scatter_in)->wait();
  EXPECT_OR_FAIL(torch::allclose(scatter_out[0], sum + world * rank), "reduce_scatter");
  group->barrier()->wait();
  // A failure is a c10::Error carrying hmc's message.
  std::vector<at::Tensor> ints = {torch::ones({3}, torch::kInt16)};
  try {
    group->allreduce(ints);
    EXPECT_OR_FAIL(false, "int16 should be refused");
  } catch (const c10::Error& e) {
    EXPECT_OR_FAIL(absl::StrContains(e.what(), "is not one hmc reduces"), "message: %s", e.what());
  }
  std::printf("rank %d: process group collectives correct (traffic %llu calls)\n", rank,
              static_cast<unsigned long long>(group->traffic().calls));
  return 0;
}

int RunCollaborative(std::shared_ptr<Communicator> comm, bool delay) {
  const int rank = comm->rank(), world = comm->size();
  constexpr int kTarget = 48;
  constexpr int kRounds = 3;
  // Loss = sum(w * c): the gradient of a batch is c = rank + 1 everywhere, so the group's
  // average over a round is sum_r n_r (r + 1) / sum_r n_r.
  torch::Tensor w = torch::zeros({4}, torch::requires_grad());
  torch::optim::SGD sgd({w}, 1.0);
  CollaborativeOptimizer collab(comm, {w}, sgd,
                                {.target_batch_size = kTarget,
                                 .delay_updates = delay,
                                 .progress_interval = absl::Milliseconds(2),
                                 .run = delay ? "delayed" : "plain"});
  double expected = 0;
  int local_calls = 0;
  std::vector<double> pending;  // Round averages not yet applied (delayed updates).
  for (int round = 0; round < kRounds; ++round) {
    bool stepped = false;
    for (int i = 0; i < 2000 && !stepped; ++i) {
      // Rank r is r+1 times slower: it contributes fewer samples.
      absl::SleepFor(absl::Milliseconds(1 + 2 * rank));
      (w * static_cast<float>(rank + 1)).sum().backward();
      ++local_calls;
      stepped = collab.Step(4);
    }
    EXPECT_OR_FAIL(stepped, "no step within 2000 batches");
    if (!delay) {
      // Each rank's samples in the round, gathered here: the weighted average is recomputed
      // from them independently of the optimizer.
      int64_t mine = collab.last_round_local_samples();
      std::vector<int64_t> counts(world);
      Buffer in{&mine, 1, DType::kI64}, out{counts.data(), counts.size(), DType::kI64};
      if (!comm->AllGather(in, out)->Wait().ok()) return 1;
      int64_t total = 0;
      double weighted = 0;
      for (int r = 0; r < world; ++r) {
        total += counts[r];
        weighted += counts[r] * (r + 1.0);
      }
      EXPECT_OR_FAIL(total == collab.last_round_samples(), "group count %lld vs %lld",
                     static_cast<long long>(total),
                     static_cast<long long>(collab.last_round_samples()));
      // Rounds end when the group's samples predicted from the peers' rates reach the target:
      // near it, perhaps a little short (a rate extrapolated over at most a read's lag).
      EXPECT_OR_FAIL(total >= kTarget / 2, "stepped at %lld samples, far before the target %d",
                     static_cast<long long>(total), kTarget);
      expected -= weighted / total;
      EXPECT_OR_FAIL(std::abs(w[0].item<double>() - expected) < 1e-4,
                     "w = %f, expected %f after round %d", w[0].item<double>(), expected, round);
    }
  }
  collab.Finish();
  EXPECT_OR_FAIL(collab.steps() == kRounds, "steps %lld", static_cast<long long>(collab.steps()));
  if (delay) {
    // Every rank holds the same parameters, and each step moved them by an average in
    // [1, world] (the range of the per-rank gradients).
    std::vector<float> ws(world);
    Buffer in{w.data_ptr(), 1, DType::kF32}, out{ws.data(), ws.size(), DType::kF32};
    if (!comm->AllGather(in, out)->Wait().ok()) return 1;
    for (float v : ws) EXPECT_OR_FAIL(v == ws[0], "ranks disagree on the parameters");
    EXPECT_OR_FAIL(-ws[0] >= kRounds * 1.0 && -ws[0] <= kRounds * world, "w = %f", ws[0]);
  }
  std::printf("rank %d: %d local batches, %lld steps, w = %.4f\n", rank, local_calls,
              static_cast<long long>(collab.steps()), w[0].item<double>());
  return 0;
}

int RunMismatch(std::shared_ptr<Communicator> comm) {
  auto model = MakeModel(comm->rank() == 1 ? 33 : 32);
  try {
    DistributedDataParallel ddp(comm, model->parameters());
  } catch (const c10::Error& e) {
    std::printf("rank %d: refused: %s\n", comm->rank(), e.what_without_backtrace());
    EXPECT_OR_FAIL(absl::StrContains(e.what(), "rank 1"), "the error names rank 1");
    return 0;
  }
  EXPECT_OR_FAIL(false, "different models were not refused");
}

}  // namespace
}  // namespace hmc::ddp

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: hmc-test-ddp MODE (see the top of ddp_rank.cc)\n");
    return 1;
  }
  torch::set_num_threads(1);
  absl::StatusOr<hmc::Options> options = hmc::Options::FromEnvironment();
  if (!options.ok()) return 1;
  absl::StatusOr<std::unique_ptr<hmc::Communicator>> created = hmc::Communicator::Create(*options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", std::string(created.status().message()).c_str());
    return 1;
  }
  std::shared_ptr<hmc::Communicator> comm = std::move(*created);
  const std::string mode = argv[1];
  try {
    if (mode == "ddp") return hmc::ddp::RunDdp(comm);
    if (mode == "reducer") return hmc::ddp::RunReducer(comm);
    if (mode == "pg") return hmc::ddp::RunProcessGroup(comm);
    if (mode == "collab") {
      return hmc::ddp::RunCollaborative(comm, argc > 2 && std::string(argv[2]) == "--delay");
    }
    if (mode == "mismatch") return hmc::ddp::RunMismatch(comm);
    if (mode == "survive") return hmc::ddp::RunSurvive(comm);
    if (mode == "rejoin") return hmc::ddp::RunRejoin(comm, /*through_reducer=*/false);
    if (mode == "reducer-rejoin") return hmc::ddp::RunRejoin(comm, /*through_reducer=*/true);
    if (mode == "collab-rejoin") return hmc::ddp::RunCollabRejoin(comm);
    if (mode == "diloco") return hmc::ddp::RunDiLoCo(comm);
    if (mode == "diloco-stream") return hmc::ddp::RunDiLoCoStreaming(comm);
    if (mode == "diloco-survive") return hmc::ddp::RunDiLoCoSurvive(comm);
    if (mode == "diloco-rejoin") return hmc::ddp::RunDiLoCoRejoin(comm);
    if (mode == "diloco-restore") return hmc::ddp::RunDiLoCoRestore(comm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 1;
}
