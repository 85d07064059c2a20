#include "collectives/communicator.h"

#include <sys/resource.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectives/broadcast.h"
#include "collectives/butterfly.h"
#include "collectives/halving_doubling.h"
#include "collectives/hierarchical.h"
#include "collectives/host_collectives.h"
#include "collectives/shares.h"
#include "core/log.h"
#include "transports/tcp/tcp_transport.h"

namespace hmc {
namespace {

// The epoch of a freshly completed world; later epochs come with elastic membership.
constexpr uint32_t kInitialEpoch = 1;

}  // namespace

Communicator::Communicator(int rank, std::vector<std::shared_ptr<Channel>> channels,
                           const Options& options)
    : rank_(rank), options_(options), channels_(std::move(channels)) {
  pool_ = std::make_unique<WorkerPool>(static_cast<int>(options.workers));
}

std::unique_ptr<Communicator> Communicator::CreateFromChannels(
    int rank, std::vector<std::shared_ptr<Channel>> channels, const Options& options,
    const std::vector<std::string>& zones) {
  std::unique_ptr<Communicator> comm(new Communicator(rank, std::move(channels), options));
  comm->peers_.world_size = comm->size();
  for (int r = 0; r < comm->size(); ++r) {
    PeerEntry entry;
    entry.rank = r;
    entry.zone = zones.empty() ? options.zone : zones[r % zones.size()];
    comm->peers_.peers.push_back(entry);
  }
  return comm;
}

std::vector<int> Communicator::ZoneIndexes() const {
  std::map<std::string, int> index;
  std::vector<int> zone_of;
  for (const PeerEntry& p : peers_.peers) {
    zone_of.push_back(index.emplace(p.zone, static_cast<int>(index.size())).first->second);
  }
  return zone_of;
}

namespace {

// Each peer costs `streams` sockets, so a large group with many streams outgrows the usual soft
// limit of 1024 descriptors; the hard limit is the process's to take.
void RaiseDescriptorLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(const Options& options) {
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  RaiseDescriptorLimit();
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> client = CoordinatorClient::Connect(options);
  if (!client.ok()) return client.status();
  TcpTransportConfig config;
  config.bind = options.bind_addr;
  if (config.bind.empty()) {
    // The interface that reaches the coordinator, any port.
    SocketAddress local = (*client)->local_address();
    local.set_port(0);
    config.bind = local.ToString();
  }
  config.token = options.token;
  config.world_id = options.world_id;
  config.socket_buffer_bytes = options.socket_buffer_bytes;
  config.tcp_congestion = options.tcp_congestion;
  config.local_sockets = options.local_sockets;
  config.max_unexpected_bytes = static_cast<uint64_t>(options.max_unexpected_bytes);
  config.limits.streams =
      static_cast<int>(options.streams > 0 ? options.streams : options.max_streams);
  config.limits.stripe_min_bytes = static_cast<uint64_t>(options.stripe_min_bytes);
  config.limits.max_frame_bytes = static_cast<uint64_t>(options.max_frame_bytes);
  config.limits.epoch = kInitialEpoch;
  config.limits.pull_min_bytes = static_cast<uint64_t>(options.pull_min_bytes);
  absl::StatusOr<std::unique_ptr<TcpTransport>> transport = TcpTransport::Create(config);
  if (!transport.ok()) return transport.status();
  if (absl::Status s = (*client)->Join((*transport)->address(), deadline); !s.ok()) return s;
  absl::StatusOr<PeerTable> table = (*client)->WaitForPeers(deadline);
  if (!table.ok()) return table.status();
  const int rank = (*client)->rank();
  std::vector<PeerAddress> addresses;
  for (const PeerEntry& p : table->peers) {
    addresses.push_back(PeerAddress{p.rank, p.address, table->Describe(p.rank)});
  }
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> channels =
      (*transport)->ConnectAll(rank, addresses, deadline);
  if (!channels.ok()) return channels.status();
  std::unique_ptr<Communicator> comm(new Communicator(rank, std::move(*channels), options));
  comm->peers_ = *table;
  if (!options.prices.empty()) {
    absl::StatusOr<PriceTable> prices = PriceTable::Load(options.prices);
    if (!prices.ok()) return prices.status();
    comm->prices_ = *std::move(prices);
  }
  Communicator* raw = comm.get();
  // Channel errors already begin with the peer's description.
  (*transport)->SetFailureCallback([raw](int, const absl::Status& why) { raw->Abort(why); });
  (*client)->SetMembershipCallback([raw](const PeerTable& table) {
    if (table.epoch == 0) return;  // Coordinator lost: the data path goes on without it.
    for (const PeerEntry& p : table.peers) {
      if (!p.alive && p.failure != "left") {
        raw->Abort(absl::UnavailableError(absl::StrFormat(
            "the coordinator declared %s failed: %s", raw->peers_.Describe(p.rank), p.failure)));
      }
    }
  });
  comm->transport_ = std::move(*transport);
  comm->coordinator_ = std::move(*client);
  comm->stream_choice_.streams = config.limits.streams;
  if (options.streams == 0 && comm->size() > 1) {
    if (absl::Status s = comm->ProbeStreams(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("choosing streams per peer: ", s.message()));
    }
  }
  if (options.probe && comm->size() > 1) {
    if (absl::Status s = comm->ProbeLinks(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("probing links: ", s.message()));
    }
  }
  return comm;
}

Communicator::~Communicator() {
  pool_.reset();  // Runs what is queued; each call ends by its deadline.
  if (transport_ != nullptr && health().ok()) transport_->Shutdown(absl::Now() + absl::Seconds(5));
  // Each callback's thread is joined before what it touches goes away: the coordinator client's
  // thread first, then the transport's progress thread, then the channels.
  if (coordinator_ != nullptr) {
    coordinator_->SetMembershipCallback(nullptr);
    coordinator_->Leave();
  }
  coordinator_.reset();
  if (transport_ != nullptr) transport_->SetFailureCallback(nullptr);
  transport_.reset();
  channels_.clear();
}

absl::Status Communicator::health() const {
  MutexLock lock(&mu_);
  return broken_;
}

std::vector<LinkStats> Communicator::link_stats() const {
  std::vector<LinkStats> stats(channels_.size());
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (channels_[i] != nullptr) stats[i] = channels_[i]->stats();
  }
  return stats;
}

void Communicator::Abort(const absl::Status& why) {
  {
    MutexLock lock(&mu_);
    if (!broken_.ok()) return;
    broken_ = why;
  }
  Logf("comm", "rank %d: aborting: %s", rank_, why.message());
  for (auto& channel : channels_) {
    if (channel != nullptr) channel->Close(why);
  }
}

absl::Status Communicator::CheckBuffers(const Buffer& in, const Buffer& out, size_t in_count,
                                        size_t out_count) const {
  if (!in.device.is_host() || !out.device.is_host()) {
    return absl::UnimplementedError("device buffers need the CUDA layer; pass host buffers");
  }
  if (in.dtype != out.dtype) {
    return absl::InvalidArgumentError(
        absl::StrFormat("input is %s but output is %s", DTypeName(in.dtype), DTypeName(out.dtype)));
  }
  if (in.count != in_count || out.count != out_count) {
    return absl::InvalidArgumentError(
        absl::StrFormat("expected %d input and %d output elements, got %d and %d", in_count,
                        out_count, in.count, out.count));
  }
  if ((in.count > 0 && in.data == nullptr) || (out.count > 0 && out.data == nullptr)) {
    return absl::InvalidArgumentError("null buffer");
  }
  return absl::OkStatus();
}

std::shared_ptr<Work> Communicator::Launch(CallDescriptor descriptor, absl::Status local_check,
                                           std::string algorithm_name, const CallOptions& call,
                                           Algorithm algorithm, size_t chunk_bytes,
                                           std::string plan_detail) {
  auto work = std::make_shared<Work>();
  uint32_t sequence;
  {
    MutexLock lock(&mu_);
    sequence = next_sequence_++;
  }
  CollectiveReport report;
  report.name = absl::StrFormat("%s #%d", CollectiveName(descriptor.kind), sequence);
  report.algorithm = std::move(algorithm_name);
  report.plan = std::move(plan_detail);
  descriptor.locally_invalid = !local_check.ok();
  if (!local_check.ok() && !options_.check_args) {
    work->Complete(
        absl::Status(local_check.code(), absl::StrFormat("%s on rank %d: %s", report.name, rank_,
                                                         local_check.message())),
        report);
    return work;
  }
  const absl::Duration timeout =
      call.timeout > absl::ZeroDuration() ? call.timeout : options_.timeout;
  if (chunk_bytes == 0) chunk_bytes = static_cast<size_t>(options_.chunk_bytes);
  pool_->Submit([this, work, sequence, descriptor, local_check, report, timeout, chunk_bytes,
                 algorithm = std::move(algorithm)]() mutable {
    if (absl::Status broken = health(); !broken.ok()) {
      work->Complete(
          absl::FailedPreconditionError(absl::StrFormat("%s on rank %d: communicator unusable: %s",
                                                        report.name, rank_, broken.message())),
          report);
      return;
    }
    CollectiveContext ctx(rank_, size(), &channels_, sequence, report.name, absl::Now() + timeout,
                          chunk_bytes, &scratch_);
    if (options_.pace_sends) ctx.EnablePacing(send_bytes_per_s_.load());
    const absl::Time start = absl::Now();
    absl::Status checked;
    if (options_.check_args || descriptor.kind == CollectiveKind::kBarrier) {
      checked = CheckArguments(ctx, descriptor);
    }
    // A verdict of the check (OK or a mismatch) is the same on every rank.
    const bool verdict = checked.ok() || absl::IsInvalidArgument(checked);
    absl::Status status = checked;
    if (!local_check.ok() && verdict) {
      // This rank's own reason is more precise than "buffers differ".
      status = absl::Status(local_check.code(), absl::StrFormat("%s on rank %d: %s", report.name,
                                                                rank_, local_check.message()));
    }
    report.check_time = absl::Now() - start;
    bool ran = false;
    if (status.ok()) {
      ctx.BeginPhases();
      status = algorithm(ctx);
      ran = true;
    }
    report.data_time = absl::Now() - start - report.check_time;
    // The NIC does not change: what one call measured paces the next ones' sends too. (Calls
    // may run on several workers at once, hence the atomic maximum.)
    double seen = send_bytes_per_s_.load();
    while (ctx.send_bytes_per_s() > seen &&
           !send_bytes_per_s_.compare_exchange_weak(seen, ctx.send_bytes_per_s())) {
    }
    report.send_bytes_per_s = ctx.send_bytes_per_s();
    report.paced_links = ctx.paced_links();
    report.phases = ctx.phases();
    report.bytes_sent = ctx.bytes_sent();
    report.bytes_received = ctx.bytes_received();
    AccountEgress(ctx.bytes_sent_to(), report);
    // Ranks stay in step when no data moved and the check's verdict was shared; otherwise the
    // group cannot continue.
    if (!status.ok() && (ran || !verdict)) Abort(status);
    ctx.Drain();
    work->Complete(status, report);
  });
  return work;
}

LinkMatrix Communicator::links() const {
  MutexLock lock(&mu_);
  return *links_;
}

absl::StatusOr<AllReducePlan> Communicator::PlanAllReduce(const Buffer& in,
                                                          const CallOptions& call) const {
  TunerInput input;
  input.bytes = in.bytes();
  input.zone_of = ZoneIndexes();
  std::shared_ptr<const LinkMatrix> matrix;
  {
    MutexLock lock(&mu_);
    matrix = links_;
  }
  input.links = matrix.get();
  input.algo = call.algo.empty() ? options_.algo : call.algo;
  input.codec_inter = call.codec_inter.empty() ? options_.codec_inter : call.codec_inter;
  input.codec_intra = call.codec_intra.empty() ? options_.codec_intra : call.codec_intra;
  input.shares = call.shares.empty() ? options_.shares : call.shares;
  input.small_message_bytes = static_cast<size_t>(options_.small_message_bytes);
  input.chunk_bytes = static_cast<size_t>(options_.chunk_bytes);
  input.codec_encode_bytes_per_s = matrix->auto_codec_bytes_per_s;
  return ChoosePlan(input);
}

absl::StatusOr<const Codec*> Communicator::CodecFor(const std::string& spec) {
  if (spec == "none") return nullptr;
  MutexLock lock(&mu_);
  auto it = codecs_.find(spec);
  if (it == codecs_.end()) {
    absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(spec);
    if (!codec.ok()) return codec.status();
    it = codecs_.emplace(spec, *std::move(codec)).first;
  }
  return it->second.get();
}

void Communicator::AccountEgress(const std::vector<uint64_t>& bytes_sent_to,
                                 CollectiveReport& report) const {
  const std::string& mine = peers_.peers[rank_].zone;
  for (size_t peer = 0; peer < bytes_sent_to.size(); ++peer) {
    const std::string& theirs = peers_.peers[peer].zone;
    if (theirs == mine) continue;
    report.bytes_sent_across_zones += bytes_sent_to[peer];
    report.egress_usd += bytes_sent_to[peer] / 1e9 * prices_.UsdPerGb(mine, theirs);
  }
}

std::vector<std::string> Communicator::TrialCandidates(const std::string& rules_choice) const {
  std::vector<std::string> candidates = {rules_choice};
  const bool hierarchical = ZonesShareRanks(ZoneIndexes());
  for (const char* algorithm : {"hierarchical", "butterfly", "ring"}) {
    if (algorithm == rules_choice) continue;
    if (std::string(algorithm) == "hierarchical" && !hierarchical) continue;
    candidates.push_back(algorithm);
  }
  return candidates;
}

std::shared_ptr<Work> Communicator::AllReduce(const Buffer& in, const Buffer& out, ReduceOp op,
                                              const CallOptions& call) {
  absl::Status check = CheckBuffers(in, out, in.count, in.count);
  absl::StatusOr<AllReducePlan> planned = PlanAllReduce(in, call);
  // An algorithm the rules chose for a large message is tried against the others (plan_trials.h).
  std::string trial_class;
  PlanTrials::Step step;
  if (planned.ok() && options_.explore && size() > 1 && !planned->algorithm_forced &&
      planned->algorithm != "halving_doubling") {
    trial_class =
        absl::StrFormat("%d|%s|%s|%s|%s|%s", std::bit_width(in.bytes()), DTypeName(in.dtype),
                        ReduceOpName(op), planned->codec_inter, planned->codec_intra, call.shares);
    const absl::Duration timeout =
        call.timeout > absl::ZeroDuration() ? call.timeout : options_.timeout;
    step = trials_.Next(trial_class, TrialCandidates(planned->algorithm), absl::Now() + timeout);
    CallOptions tried = call;
    tried.algo = step.algorithm;
    planned = PlanAllReduce(in, tried);
    if (planned.ok()) planned->why = step.why;
  }
  if (check.ok() && !planned.ok()) check = planned.status();
  const AllReducePlan plan = planned.ok() ? *planned : AllReducePlan{};
  const std::vector<std::string> algorithms = {"ring", "halving_doubling", "hierarchical",
                                               "butterfly"};
  const auto known = std::find(algorithms.begin(), algorithms.end(), plan.algorithm);
  if (check.ok() && known == algorithms.end()) {
    check = absl::InvalidArgumentError(absl::StrFormat(
        "unknown all-reduce algorithm '%s' (ring, halving_doubling, hierarchical, butterfly)",
        plan.algorithm));
  }
  // Codecs by link class; a bad spec fails the call on this rank (and so on every rank).
  const Codec* inter = nullptr;
  const Codec* intra = nullptr;
  for (auto [spec, codec] : {std::pair{&plan.codec_inter, &inter}, {&plan.codec_intra, &intra}}) {
    absl::StatusOr<const Codec*> made = CodecFor(*spec);
    if (check.ok() && !made.ok()) check = made.status();
    if (made.ok()) *codec = *made;
  }
  CallDescriptor d{CollectiveKind::kAllReduce,
                   in.dtype,
                   op,
                   static_cast<uint8_t>(1 + (known - algorithms.begin())),
                   0,
                   in.count};
  d.plan = plan.Fingerprint();
  const std::string detail = CodecsApply(in.dtype, op)
                                 ? absl::StrFormat("%s; codecs inter=%s intra=%s", plan.why,
                                                   plan.codec_inter, plan.codec_intra)
                                 : plan.why;
  auto run = [=, this](CollectiveContext& ctx) {
    if (in.count == 0) return absl::OkStatus();
    if (size() == 1) {
      if (in.data != out.data) std::memcpy(out.data, in.data, in.bytes());
      return absl::OkStatus();
    }
    const std::vector<int> zone_of = ZoneIndexes();
    if (plan.algorithm == "hierarchical") {
      return HierarchicalAllReduce(ctx, zone_of, in.data, out.data, in.count, in.dtype, op, inter,
                                   call.feedback);
    }
    if (plan.algorithm == "butterfly") {
      LinkCodecs codecs;
      bool spans_zones = false;
      for (int p = 0; p < size(); ++p) {
        codecs.for_peer.push_back(zone_of[p] == zone_of[rank_] ? intra : inter);
        spans_zones |= zone_of[p] != zone_of[rank_];
      }
      codecs.gather = spans_zones ? inter : intra;
      codecs.feedback = call.feedback;
      return ButterflyAllReduce(ctx, in.data, out.data, in.count, in.dtype, op,
                                PartsByWeight(in.count, plan.shares), codecs,
                                /*pace_links=*/false);
    }
    return plan.algorithm == "ring"
               ? RingAllReduce(ctx, in.data, out.data, in.count, in.dtype, op)
               : HalvingDoublingAllReduce(ctx, in.data, out.data, in.count, in.dtype, op);
  };
  if (step.trial < 0) return Launch(d, check, plan.algorithm, call, run, plan.chunk_bytes, detail);
  // A trial: its time is the slowest rank's, agreed inside the call, so every rank records the
  // same. Halving-doubling's phases are not among the candidates': its messages cannot meet theirs.
  auto agreed = std::make_shared<double>(PlanTrials::kFailed);
  std::shared_ptr<Work> work = Launch(
      d, check, plan.algorithm, call,
      [run, agreed](CollectiveContext& ctx) {
        const absl::Time start = absl::Now();
        absl::Status s = run(ctx);
        double seconds = absl::ToDoubleSeconds(absl::Now() - start);
        if (s.ok()) {
          s = HalvingDoublingAllReduce(ctx, &seconds, &seconds, 1, DType::kF64, ReduceOp::kMax);
        }
        if (s.ok()) *agreed = seconds;
        return s;
      },
      plan.chunk_bytes, detail);
  work->OnDone([this, trial_class, trial = step.trial, agreed](const absl::Status& status) {
    trials_.Finished(trial_class, trial, status.ok() ? *agreed : PlanTrials::kFailed);
  });
  return work;
}

std::shared_ptr<Work> Communicator::ReduceScatter(const Buffer& in, const Buffer& out, ReduceOp op,
                                                  const CallOptions& call) {
  absl::Status check = CheckBuffers(in, out, out.count * size(), out.count);
  CallDescriptor d{CollectiveKind::kReduceScatter, in.dtype, op, 1, 0, out.count};
  return Launch(d, check, "ring", call, [=](CollectiveContext& ctx) {
    if (out.count == 0) return absl::OkStatus();
    return RingReduceScatterBlocks(ctx, in.data, out.data, out.count, in.dtype, op);
  });
}

std::shared_ptr<Work> Communicator::AllGather(const Buffer& in, const Buffer& out,
                                              const CallOptions& call) {
  absl::Status check = CheckBuffers(in, out, in.count, in.count * size());
  CallDescriptor d{CollectiveKind::kAllGather, in.dtype, ReduceOp::kSum, 1, 0, in.count};
  return Launch(d, check, "ring", call, [=](CollectiveContext& ctx) {
    if (in.count == 0) return absl::OkStatus();
    return RingAllGatherBlocks(ctx, in.data, out.data, in.count, in.dtype);
  });
}

std::shared_ptr<Work> Communicator::Broadcast(const Buffer& in, const Buffer& out, int root,
                                              const CallOptions& call) {
  absl::Status check = CheckBuffers(in, out, out.count, out.count);
  if (check.ok() && (root < 0 || root >= size())) {
    check = absl::InvalidArgumentError(
        absl::StrFormat("root %d is outside a group of %d ranks", root, size()));
  }
  CallDescriptor d{CollectiveKind::kBroadcast, out.dtype, ReduceOp::kSum, 1, root, out.count};
  return Launch(d, check, "chain", call, [=, this](CollectiveContext& ctx) {
    if (out.count == 0) return absl::OkStatus();
    if (rank_ == root && in.data != out.data) std::memcpy(out.data, in.data, out.bytes());
    return ChainBroadcast(ctx, out.byte_data(), out.bytes(), root);
  });
}

std::shared_ptr<Work> Communicator::Send(const Buffer& buffer, int peer) {
  return PointToPoint(buffer, peer, /*send=*/true);
}

std::shared_ptr<Work> Communicator::Recv(const Buffer& buffer, int peer) {
  return PointToPoint(buffer, peer, /*send=*/false);
}

std::shared_ptr<Work> Communicator::PointToPoint(const Buffer& buffer, int peer, bool send) {
  auto work = std::make_shared<Work>();
  CollectiveReport report;
  report.algorithm = "direct";
  report.name =
      absl::StrFormat("%s %s rank %d", send ? "send" : "recv", send ? "to" : "from", peer);
  absl::Status check = CheckBuffers(buffer, buffer, buffer.count, buffer.count);
  if (check.ok() && (peer < 0 || peer >= size() || peer == rank_)) {
    check = absl::InvalidArgumentError(
        absl::StrFormat("peer %d is not another rank of %d", peer, size()));
  }
  if (check.ok()) check = health();
  if (!check.ok()) {
    work->Complete(absl::Status(check.code(), absl::StrFormat("%s on rank %d: %s", report.name,
                                                              rank_, check.message())),
                   report);
    return work;
  }
  uint32_t count;
  {
    MutexLock lock(&mu_);
    std::vector<uint32_t>& counts = send ? sends_to_ : receives_from_;
    if (counts.empty()) counts.assign(size(), 0);
    count = counts[peer]++;
  }
  const uint64_t tag = MakeTag(count, Phase::kPointToPoint, 0, 0);
  RequestPtr request = send ? channels_[peer]->Send(tag, buffer.data, buffer.bytes())
                            : channels_[peer]->Recv(tag, buffer.data, buffer.bytes());
  (send ? report.bytes_sent : report.bytes_received) = buffer.bytes();
  const absl::Time start = absl::Now();
  request->Then([work, report, start](const absl::Status& status) mutable {
    report.data_time = absl::Now() - start;
    work->Complete(status, report);
  });
  return work;
}

std::shared_ptr<Work> Communicator::Barrier(const CallOptions& call) {
  return Launch(CallDescriptor{}, absl::OkStatus(), "direct", call,
                [](CollectiveContext&) { return absl::OkStatus(); });
}

std::string Communicator::UserKey(const std::string& key) const {
  return absl::StrCat("hmc/user/", options_.world_id, "/", key);
}

absl::Status Communicator::PutKey(const std::string& key, const std::string& value) {
  if (coordinator_ == nullptr) return absl::FailedPreconditionError("no coordinator");
  return coordinator_->Put(UserKey(key), value, absl::Now() + options_.connect_timeout);
}

std::vector<absl::StatusOr<std::string>> Communicator::GetKeys(const std::vector<std::string>& keys,
                                                               absl::Time deadline) {
  if (coordinator_ == nullptr) {
    return std::vector<absl::StatusOr<std::string>>(
        keys.size(), absl::FailedPreconditionError("no coordinator"));
  }
  std::vector<std::string> scoped;
  for (const std::string& key : keys) scoped.push_back(UserKey(key));
  return coordinator_->GetMany(scoped, deadline);
}

}  // namespace hmc
