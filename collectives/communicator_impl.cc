#include "collectives/communicator_impl.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectives/allreduce_algorithms.h"
#include "collectives/bandwidth_model.h"
#include "collectives/broadcast.h"
#include "collectives/halving_doubling.h"
#include "collectives/host_collectives.h"
#include "core/log.h"
#include "core/placement.h"
#include "core/socket.h"
#include "transports/transport_factory.h"

namespace hmc {
namespace {

// The epoch of a freshly completed world (the coordinator's first table).
constexpr uint32_t kInitialEpoch = 1;

// How long a Work's Wait() without a deadline waits past the call's deadline: the worker ends the
// call by its deadline and then drains its requests (CollectiveContext::Drain, 30 s at most).
constexpr absl::Duration kDrainGrace = absl::Seconds(35);

}  // namespace

CommunicatorImpl::CommunicatorImpl(int id, std::vector<std::shared_ptr<Channel>> channels,
                                   const PeerTable& table, const Options& options,
                                   LinkProbeRecord probe)
    : id_(id), options_(options) {
  pool_ = std::make_shared<WorkerPool>(static_cast<int>(options.workers), options.waiter_grace);
  callbacks_ = std::make_shared<WorkerPool>(1);
  MutexLock lock(&mu_);
  world_channels_ = std::move(channels);
  world_channels_.resize(std::max(world_channels_.size(), table.peers.size()));
  probe_ = std::move(probe);
  group_ = Group::Make(table, id, world_channels_, WorldLinks(probe_, table));
  world_table_ = table;
  membership_thread_ = std::thread([this] { MembershipLoop(); });
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::CreateFromChannels(
    int rank, std::vector<std::shared_ptr<Channel>> channels, const Options& options,
    const std::vector<std::string>& zones) {
  PeerTable table;
  table.epoch = kInitialEpoch;
  table.world_size = static_cast<int>(channels.size());
  for (int r = 0; r < table.world_size; ++r) {
    PeerEntry entry;
    entry.rank = r;
    entry.zone = zones.empty() ? options.zone : zones[r % zones.size()];
    table.peers.push_back(entry);
  }
  return std::unique_ptr<CommunicatorImpl>(
      new CommunicatorImpl(rank, std::move(channels), table, options));
}

std::shared_ptr<const Group> CommunicatorImpl::group() const {
  MutexLock lock(&mu_);
  return group_;
}

namespace {

// The process-wide settings a rank needs before its threads start.
void PrepareProcess() {
  RaiseDescriptorLimit();
  SkipMutexCycleDetectionInReleaseBuilds();
}

// Binds this rank where options.bind and its local rank say (core/placement.h), the progress
// threads near the interface that reaches the coordinator (`ip`'s); returns what it did, for
// reports. A machine hwloc cannot read leaves the rank unbound, with the reason logged.
std::string PlaceThisRank(const Options& options, const std::string& ip) {
  if (!options.bind) return "unbound (bind=0)";
  const PlacementRequest request{static_cast<int>(options.local_rank),
                                 static_cast<int>(options.local_size), InterfaceOf(ip)};
  absl::StatusOr<Placement> plan = absl::UnknownError("no machine");
  absl::StatusOr<std::unique_ptr<Machine>> machine = Machine::Load();
  if (!machine.ok()) {
    plan = machine.status();
  } else {
    plan = PlanPlacement(**machine, request,
                         request.nic.empty() ? std::nullopt : (*machine)->NicLocality(request.nic));
  }
  absl::Status installed = plan.status();
  const std::string all_cpus = machine.ok() ? (*machine)->AllCpus() : "";
  if (plan.ok()) installed = InstallPlacement(std::move(*machine), *plan);
  if (!installed.ok()) {
    Logf("placement", "threads unbound: %s", installed.message());
    return absl::StrCat("unbound: ", installed.message());
  }
  // Logged where it binds anything: a rank alone on its machine, with its NIC's place unknown,
  // runs where it would unbound.
  if (plan->cpus != all_cpus || plan->progress_cpus != plan->cpus) {
    Logf("placement", "local rank %d of %d: %s", request.local_rank, request.local_size,
         plan->Describe());
  }
  return plan->Describe();
}

// A rank that joins a running group: its links are not probed. It reports the round trips its
// connections measured and the probe it knows, from which every rank infers the rest alike
// (joiner_links.h), and waits for the coordinator to make it a member (`table` then holds that
// epoch). Returns the probe it knows.
absl::StatusOr<LinkProbeRecord> FinishJoining(CoordinatorClient& client,
                                              const std::vector<std::shared_ptr<Channel>>& channels,
                                              const Options& options, absl::Time deadline,
                                              PeerTable& table) {
  JoinedLinks measured;
  measured.rtt_ms.assign(table.peers.size(), -1);
  for (const std::shared_ptr<Channel>& channel : channels) {
    if (channel == nullptr) continue;
    const double rtt = absl::ToDoubleMilliseconds(channel->round_trip());
    measured.rtt_ms[channel->peer_rank()] = channel->local() ? 0 : rtt > 0 ? rtt : -1;
  }
  // The members put it there before any of them let a rank join; a coordinator restarted since
  // has none (the links are then planned unmeasured), so it is not waited for long.
  LinkProbeRecord probe;
  absl::StatusOr<std::string> recorded = client.Get(
      LinkProbeKey(options.world_id), std::min(deadline, absl::Now() + absl::Milliseconds(300)));
  if (recorded.ok()) {
    absl::StatusOr<LinkProbeRecord> parsed = LinkProbeRecord::Parse(*recorded);
    if (parsed.ok()) probe = *std::move(parsed);
  }
  measured.probe = probe.Fingerprint();
  // Every member accepted this rank's streams: the coordinator may make it one.
  absl::StatusOr<PeerTable> joined = client.FinishJoin(measured, deadline);
  if (!joined.ok()) return joined.status();
  table = *std::move(joined);
  Logf("comm", "rank %d joined the running group at epoch %d (%d members)", client.rank(),
       table.epoch, table.Members().size());
  return probe;
}

// What an all-reduce (or an averaging attempt's, with `round`) tells its peers before data moves.
CallDescriptor AllReduceDescriptor(const Buffer& in, ReduceOp op,
                                   const AllReduceAlgorithm* algorithm, const AllReducePlan& plan,
                                   const AveragingAttempt* round) {
  CallDescriptor d{round != nullptr ? CollectiveKind::kAverage : CollectiveKind::kAllReduce,
                   in.dtype,
                   op,
                   algorithm != nullptr ? algorithm->wire_id : uint8_t{0},
                   0,
                   in.count};
  d.plan = plan.Fingerprint();
  if (round != nullptr) {
    d.round = round->round;
    d.weight = round->weight;
    d.state = round->state != nullptr ? round->state->Fingerprint() : 0;
    d.stale = round->stale;
    d.part = round->part;
    d.closes_round = round->closes;
  }
  return d;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CommunicatorImpl>> CommunicatorImpl::Create(const Options& options) {
  if (absl::Status s = CheckAllReduceAlgorithmOption(options.algo); !s.ok()) return s;
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  PrepareProcess();
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> client = CoordinatorClient::Connect(options);
  if (!client.ok()) return client.status();
  if (options.token.empty()) {
    Logf("auth", "insecure: no token; the coordinator and every peer accept anyone who connects");
  }
  // Unless options.bind_addr says otherwise, peers reach this rank at the interface that reaches
  // the coordinator, any port.
  SocketAddress local = (*client)->local_address();
  local.set_port(0);
  // Before the transport and the workers start their threads, which bind themselves.
  std::string placement = PlaceThisRank(options, local.host());
  absl::StatusOr<std::unique_ptr<Transport>> transport =
      MakeTransport({options, options}, {.default_bind = local.ToString(),
                                         .epoch = kInitialEpoch,
                                         .ranks_on_host = static_cast<int>(options.local_size)});
  if (!transport.ok()) return transport.status();
  if (absl::Status s = (*client)->Join((*transport)->address(), deadline); !s.ok()) return s;
  absl::StatusOr<PeerTable> table = (*client)->WaitForPeers(deadline);
  if (!table.ok()) return table.status();
  const int rank = (*client)->rank();
  const bool joining = table->peers[rank].joining;
  std::vector<PeerAddress> addresses;
  for (const PeerEntry& p : table->peers) {
    if (p.alive || p.rank == rank) {
      addresses.push_back(PeerAddress{p.rank, p.address, table->Describe(p.rank), p.zone});
    }
  }
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> channels =
      (*transport)->ConnectAll(rank, addresses, deadline);
  if (!channels.ok()) return channels.status();
  LinkProbeRecord probe;
  if (joining) {
    absl::StatusOr<LinkProbeRecord> known =
        FinishJoining(**client, *channels, options, deadline, *table);
    if (!known.ok()) return known.status();
    probe = *std::move(known);
  }
  std::unique_ptr<CommunicatorImpl> comm(
      new CommunicatorImpl(rank, std::move(*channels), *table, options, std::move(probe)));
  comm->joined_running_group_ = joining;
  comm->placement_ = std::move(placement);
  if (!options.prices.empty()) {
    absl::StatusOr<PriceTable> prices = PriceTable::Load(options.prices);
    if (!prices.ok()) return prices.status();
    comm->prices_ = *std::move(prices);
  }
  comm->transport_ = std::move(*transport);
  comm->coordinator_ = std::move(*client);
  CommunicatorImpl* raw = comm.get();
  // Channel errors already begin with the peer's description.
  comm->transport_->SetFailureCallback(
      [raw](int id, const absl::Status& why) { raw->OnPeerLost(id, why); });
  comm->coordinator_->SetMembershipCallback([raw](const PeerTable& table) {
    if (table.epoch == 0) {
      raw->OnCoordinatorLost();  // The data path goes on without it.
    } else {
      raw->ApplyMembership(table);
    }
  });
  // A table that came between the one above and the callback.
  comm->ApplyMembership(comm->coordinator_->table());
  comm->stream_choice_.streams = options.connections_per_peer();
  if (joining) {
    {
      MutexLock lock(&comm->mu_);
      comm->ledger_.standing.newcomer = true;
      comm->state_stale_ = true;
    }
    // The members reconcile the epoch that made this rank one; its probes are theirs to run
    // together, so a newcomer plans without its links measured until the next ProbeLinks.
    comm->Reconcile(comm->group());
    return comm;
  }
  if (absl::Status s = comm->ProbeAtCreation(deadline); !s.ok()) return s;
  return comm;
}

absl::Status CommunicatorImpl::ProbeAtCreation(absl::Time deadline) {
  // The probes' calls end by Create's deadline: a link that drops everything fails Create.
  setup_deadline_ = deadline;
  // A member lost meanwhile (a crash, or one the coordinator declared failed) ends the probes of
  // its epoch; the survivors measure again in the next one. Each try but the last follows a new
  // epoch, which a group of n ranks sees fewer than n times for losses.
  const int tries = std::max(1, size());
  absl::Status probed;
  for (int attempt = 0; attempt < tries; ++attempt) {
    const std::shared_ptr<const Group> g = group();
    // Tens of seconds across continents: say what the rank waits for.
    if (g->size() > 1 && (options_.streams == 0 || options_.probe)) {
      Logf("comm", "rank %d: measuring its links to %d peers at epoch %d", id_, g->size() - 1,
           g->epoch);
    }
    probed = ProbeGroup(g);
    if (probed.ok() || !health().ok() || coordinator_ == nullptr) break;
    const absl::Status after = AfterFailure(*g, probed);
    if (!IsMembershipChanged(after)) return probed;  // The group is unusable now.
    probed = after;
    Logf("comm", "rank %d: %s; measuring again", id_, after.message());
  }
  if (!probed.ok()) return probed;
  setup_deadline_ = absl::InfiniteFuture();
  return absl::OkStatus();
}

absl::Status CommunicatorImpl::ProbeGroup(const std::shared_ptr<const Group>& g) {
  if (options_.streams == 0 && g->size() > 1) {
    if (absl::Status s = ProbeStreams(g); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("choosing streams per peer: ", s.message()));
    }
  }
  if (options_.probe && g->size() > 1) {
    if (absl::Status s = ProbeLinks(g); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("probing links: ", s.message()));
    }
  } else if (absl::Status s = RecordProbe(); !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

CommunicatorImpl::~CommunicatorImpl() {
  pool_->Stop();  // Runs what is queued; each call ends by its deadline.
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  membership_thread_.join();
  if (transport_ != nullptr && health().ok()) {
    if (absl::Status s = transport_->Shutdown(absl::Now() + absl::Seconds(5)); !s.ok()) {
      Logf("comm", "rank %d: leaving: %s", id_, s.message());
    }
  }
  // Each callback's thread is joined before what it touches goes away: the coordinator client's
  // thread first, then the transport's progress thread, then the channels.
  if (coordinator_ != nullptr) {
    coordinator_->SetMembershipCallback(nullptr);
    coordinator_->Leave();
  }
  coordinator_.reset();
  if (transport_ != nullptr) transport_->SetFailureCallback(nullptr);
  transport_.reset();
}

absl::Status CommunicatorImpl::health() const {
  MutexLock lock(&mu_);
  return broken_;
}

std::vector<LinkStats> CommunicatorImpl::link_stats() const {
  std::shared_ptr<const Group> g = group();
  std::vector<LinkStats> stats(g->size());
  for (int i = 0; i < g->size(); ++i) {
    if (g->channels[i] != nullptr) stats[i] = g->channels[i]->stats();
  }
  return stats;
}

void CommunicatorImpl::Abort(const absl::Status& why) {
  {
    MutexLock lock(&mu_);
    if (!broken_.ok()) return;
    broken_ = why;
  }
  Logf("comm", "rank %d: aborting: %s", id_, why.message());
  std::vector<std::shared_ptr<Channel>> channels;
  {
    MutexLock lock(&mu_);
    channels = world_channels_;
  }
  for (auto& channel : channels) {
    if (channel != nullptr) channel->Close(why);
  }
}

absl::Time CommunicatorImpl::CallDeadline(absl::Duration timeout) const {
  return std::min(absl::Now() + timeout, setup_deadline_);
}

absl::Status CommunicatorImpl::CheckBuffers(const Buffer& in, const Buffer& out, size_t in_count,
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

CheckExchange CommunicatorImpl::CheckExchangeIn(const Group& g) const {
  if (options_.check_exchange != "auto") {
    return options_.check_exchange == "forwarded" ? CheckExchange::kForwarded
                                                  : CheckExchange::kDirect;
  }
  // Forwarded only where every member shares one host's too few CPUs: each message then costs
  // the others CPU time, and no step crosses a network whose latency a direct exchange saves.
  // Ranks in network namespaces on one host (hmc-wanem's) share its name: the probe's round trips
  // (the same on every member) tell an emulated network from one host's sockets.
  const std::vector<PeerEntry>& members = g.peers.peers;
  const bool one_host = std::all_of(members.begin(), members.end(), [&](const PeerEntry& p) {
    return p.hostname == members.front().hostname;
  });
  const bool near = !g.links->measured() || g.links->LongestRtt() < 1.0;
  return one_host && near && g.cpu_share < 1 ? CheckExchange::kForwarded : CheckExchange::kDirect;
}

absl::Status CommunicatorImpl::CheckArguments(CollectiveContext& ctx, const Group& g,
                                              const CallDescriptor& descriptor,
                                              const absl::Status& local_check,
                                              const EarlySend& send_early,
                                              std::vector<CallDescriptor>* descriptors,
                                              bool* verdict) const {
  absl::Status checked;
  if (options_.check_args || descriptor.kind == CollectiveKind::kBarrier ||
      descriptors != nullptr) {
    ArgumentCheck check(ctx, descriptor, send_early.data, CheckExchangeIn(g));
    checked = check.Verdict(descriptors);
    if (checked.ok() && send_early.into != nullptr) *send_early.into = check.Early();
    if (absl::IsInvalidArgument(checked)) {
      if (absl::Status s = check.DiscardEarlyData(); !s.ok()) checked = s;
    }
  }
  // A verdict of the check (OK or a mismatch) is the same on every rank; this rank's own reason
  // is more precise than "buffers differ".
  *verdict = checked.ok() || absl::IsInvalidArgument(checked);
  if (!local_check.ok() && *verdict) {
    return absl::Status(local_check.code(), absl::StrFormat("%s on rank %d: %s", ctx.name(),
                                                            ctx.rank(), local_check.message()));
  }
  return checked;
}

void CommunicatorImpl::RecordTraffic(const CollectiveContext& ctx, const Group& g,
                                     CollectiveReport& report) {
  // The NIC does not change: what one call measured paces the next ones' sends too. (Calls may
  // run on several workers at once, hence the atomic maximum.)
  double seen = send_bytes_per_s_.load();
  while (ctx.send_bytes_per_s() > seen &&
         !send_bytes_per_s_.compare_exchange_weak(seen, ctx.send_bytes_per_s())) {
  }
  report.send_bytes_per_s = ctx.send_bytes_per_s();
  report.paced_links = ctx.paced_links();
  report.phases = ctx.phases();
  report.bytes_sent = ctx.bytes_sent();
  report.bytes_received = ctx.bytes_received();
  AccountEgress(g, ctx.bytes_sent_to(), report);
}

std::shared_ptr<Work> CommunicatorImpl::Launch(std::shared_ptr<const Group> g,
                                               CallDescriptor descriptor, absl::Status local_check,
                                               std::string algorithm_name, const CallOptions& call,
                                               Algorithm algorithm, size_t chunk_bytes,
                                               std::string plan_detail, AveragingAttempt* attempt,
                                               EarlySend send_early) {
  const absl::Duration timeout =
      call.timeout > absl::ZeroDuration() ? call.timeout : options_.timeout;
  const absl::Time deadline = CallDeadline(timeout);
  auto work = std::make_shared<Work>(deadline + kDrainGrace);
  uint32_t sequence = 0;  // 0: the call's epoch had ended when it was made.
  {
    MutexLock lock(&mu_);
    if (g->epoch == group_->epoch) sequence = next_sequence_++;
  }
  CollectiveReport report;
  report.name = absl::StrFormat("%s #%d.%d", CollectiveName(descriptor.kind), g->epoch, sequence);
  report.algorithm = std::move(algorithm_name);
  report.plan = std::move(plan_detail);
  descriptor.locally_invalid = !local_check.ok();
  if (!local_check.ok() && !options_.check_args) {
    work->Complete(
        absl::Status(local_check.code(), absl::StrFormat("%s on rank %d: %s", report.name, g->rank,
                                                         local_check.message())),
        report);
    return work;
  }
  if (chunk_bytes == 0) chunk_bytes = static_cast<size_t>(options_.chunk_bytes);
  const WorkerPool::Ticket ticket = pool_->Submit(
      [this, g, work, sequence, descriptor, local_check, report, deadline, chunk_bytes, attempt,
       algorithm = std::move(algorithm), send_early = std::move(send_early)]() mutable {
        if (absl::Status broken = health(); !broken.ok()) {
          work->Complete(absl::FailedPreconditionError(
                             absl::StrFormat("%s on rank %d: communicator unusable: %s",
                                             report.name, g->rank, broken.message())),
                         report);
          return;
        }
        if (sequence == 0 || group()->epoch != g->epoch) {
          work->Complete(MembershipChangedError(g->epoch, group()->epoch,
                                                "the call was made in an epoch that ended"),
                         report);
          return;
        }
        CollectiveContext ctx(g->rank, g->size(), &g->channels, EpochSequence(g->epoch, sequence),
                              report.name, deadline, chunk_bytes, &scratch_);
        if (options_.pace_sends) ctx.EnablePacing(send_bytes_per_s_.load());
        const absl::Time start = absl::Now();
        std::vector<CallDescriptor> descriptors;  // Every member's, for an averaging attempt.
        bool verdict = false;
        absl::Status status = CheckArguments(ctx, *g, descriptor, local_check, send_early,
                                             attempt != nullptr ? &descriptors : nullptr, &verdict);
        report.check_time = absl::Now() - start;
        bool ran = false;
        if (status.ok()) {
          ctx.BeginPhases();
          const bool closes = attempt != nullptr && attempt->closes;
          if (closes) status = PrepareAttempt(ctx, descriptors, attempt);
          if (status.ok()) status = algorithm(ctx);
          if (status.ok() && closes && EarlierPartsSummed(*attempt)) {
            status = VoteOnAttempt(ctx, *g, attempt);
          }
          ran = true;
        }
        report.data_time = absl::Now() - start - report.check_time;
        RecordTraffic(ctx, *g, report);
        // Ranks stay in step when no data moved and the check's verdict was shared; otherwise the
        // epoch cannot go on.
        if (!status.ok() && (ran || !verdict)) status = AfterFailure(*g, status);
        ctx.Drain();
        work->Complete(status, report);
      },
      WorkerPool::Start::kForAWaiter);
  work->QueuedAs(pool_, ticket);
  return work;
}

LinkMatrix CommunicatorImpl::links() const { return *group()->links; }

absl::StatusOr<AllReducePlan> CommunicatorImpl::PlanAllReduce(const Group& g, const Buffer& in,
                                                              const CallOptions& call) const {
  TunerInput input;
  input.bytes = in.bytes();
  input.zone_of = g.zone_of;
  input.cpu_share = g.cpu_share;
  input.links = g.links.get();
  input.algo = call.algo.empty() ? options_.algo : call.algo;
  input.codec_inter = call.codec_inter.empty() ? options_.codec_inter : call.codec_inter;
  input.codec_intra = call.codec_intra.empty() ? options_.codec_intra : call.codec_intra;
  input.shares = call.shares.empty() ? options_.shares : call.shares;
  input.small_message_bytes = static_cast<size_t>(options_.small_message_bytes);
  input.chunk_bytes = static_cast<size_t>(options_.chunk_bytes);
  input.codec_encode_bytes_per_s = g.links->auto_codec_bytes_per_s;
  return ChoosePlan(input);
}

absl::StatusOr<const Codec*> CommunicatorImpl::CodecFor(const std::string& spec) {
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

void CommunicatorImpl::AccountEgress(const Group& g, const std::vector<uint64_t>& bytes_sent_to,
                                     CollectiveReport& report) const {
  const std::string& mine = g.peers.peers[g.rank].zone;
  for (size_t peer = 0; peer < bytes_sent_to.size(); ++peer) {
    const std::string& theirs = g.peers.peers[peer].zone;
    if (theirs == mine) continue;
    report.bytes_sent_across_zones += bytes_sent_to[peer];
    report.egress_usd += bytes_sent_to[peer] / 1e9 * prices_.UsdPerGb(mine, theirs);
  }
}

std::vector<std::string> CommunicatorImpl::TrialCandidates(const Group& g,
                                                           const std::string& rules_choice) const {
  std::vector<std::string> candidates = {rules_choice};
  const bool zones_share_ranks = ZonesShareRanks(g.zone_of);
  for (const AllReduceAlgorithm& a : AllReduceAlgorithms()) {
    if (!a.raced || a.name == rules_choice) continue;
    if (a.needs_zones_with_several_ranks && !zones_share_ranks) continue;
    candidates.emplace_back(a.name);
  }
  return candidates;
}

std::shared_ptr<Work> CommunicatorImpl::AllReduce(const Buffer& in, const Buffer& out, ReduceOp op,
                                                  const CallOptions& call) {
  return LaunchAllReduce(group(), in, out, op, call, /*round=*/nullptr);
}

std::shared_ptr<Work> CommunicatorImpl::AllReduce(std::shared_ptr<const Group> g, const Buffer& in,
                                                  const Buffer& out, ReduceOp op) {
  return LaunchAllReduce(std::move(g), in, out, op, {}, /*round=*/nullptr);
}

std::shared_ptr<Work> CommunicatorImpl::LaunchAllReduce(std::shared_ptr<const Group> g,
                                                        const Buffer& in, const Buffer& out,
                                                        ReduceOp op, const CallOptions& call,
                                                        AveragingAttempt* round) {
  absl::Status check = CheckBuffers(in, out, in.count, in.count);
  TriedPlan tried = PlanOrTry(*g, in, op, call);
  const PlanTrials::Step& step = tried.step;
  if (check.ok() && !tried.plan.ok()) check = tried.plan.status();
  const AllReducePlan plan = tried.plan.ok() ? *tried.plan : AllReducePlan{};
  const AllReduceAlgorithm* algorithm = FindAllReduceAlgorithm(plan.algorithm);
  if (check.ok() && algorithm == nullptr) {
    check = absl::InvalidArgumentError(absl::StrFormat("unknown all-reduce algorithm '%s' (%s)",
                                                       plan.algorithm, AllReduceAlgorithmNames()));
  }
  // Codecs by link class; a bad spec fails the call on this rank (and so on every rank).
  const Codec* inter = nullptr;
  const Codec* intra = nullptr;
  for (auto [spec, codec] : {std::pair{&plan.codec_inter, &inter}, {&plan.codec_intra, &intra}}) {
    absl::StatusOr<const Codec*> made = CodecFor(*spec);
    if (check.ok() && !made.ok()) check = made.status();
    if (made.ok()) *codec = *made;
  }
  CallDescriptor d = AllReduceDescriptor(in, op, algorithm, plan, round);
  // An algorithm's early data (the one-shot's vector, the ring's first step, halving-doubling's
  // first message) leaves with the argument check's descriptors. A part of an averaging attempt's
  // too: its weighted copy (zeros where the round is stale) is made when the part is added and
  // stays until the attempt ends, so no verdict can change it.
  auto early = std::make_shared<EarlyData>();
  EarlySend send_early;
  if (algorithm != nullptr && algorithm->early != nullptr && check.ok() && step.trial < 0 &&
      g->size() > 1 && in.count > 0) {
    if (std::optional<EarlyPart> part =
            algorithm->early({g->rank, g->size(), in.count, in.dtype, plan.chunk_bytes})) {
      d.early_bytes = part->bytes;
      d.early_phase = part->phase;
      d.early_to = part->to;
      d.early_segment_bytes = part->segment_bytes;
      send_early =
          EarlySend{.data = static_cast<const uint8_t*>(in.data) + part->offset, .into = early};
    }
  }
  const std::string detail = CodecsApply(in.dtype, op)
                                 ? absl::StrFormat("%s; codecs inter=%s intra=%s", plan.why,
                                                   plan.codec_inter, plan.codec_intra)
                                 : plan.why;
  auto run = [=](CollectiveContext& ctx) {
    if (in.count == 0) return absl::OkStatus();
    if (g->size() == 1) {
      if (in.data != out.data) std::memcpy(out.data, in.data, in.bytes());
      return absl::OkStatus();
    }
    return algorithm->run(ctx,
                          AllReduceArgs{.in = in.data,
                                        .out = out.data,
                                        .count = in.count,
                                        .dtype = in.dtype,
                                        .op = op,
                                        .zone_of = g->zone_of,
                                        .shares = plan.shares,
                                        .inter = inter,
                                        .intra = intra,
                                        .feedback = call.feedback,
                                        .early = early->ridden.empty() ? nullptr : early.get()});
  };
  if (step.trial < 0) {
    return Launch(g, d, check, plan.algorithm, call, run, plan.chunk_bytes, detail, round,
                  std::move(send_early));
  }
  return LaunchTrial(g, d, check, plan, call, run, detail, round, tried);
}

std::shared_ptr<Work> CommunicatorImpl::LaunchTrial(
    std::shared_ptr<const Group> g, const CallDescriptor& d, const absl::Status& check,
    const AllReducePlan& plan, const CallOptions& call, Algorithm run, const std::string& detail,
    AveragingAttempt* round, const TriedPlan& tried) {
  // Its time is the slowest rank's, agreed inside the call, so every rank records the same.
  // Halving-doubling's phases are not among the candidates': its messages cannot meet theirs.
  auto agreed = std::make_shared<double>(PlanTrials::kFailed);
  std::shared_ptr<Work> work = Launch(
      g, d, check, plan.algorithm, call,
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
      plan.chunk_bytes, detail, round);
  work->OnDone([trials = g->trials, trial_class = tried.trial_class, trial = tried.step.trial,
                agreed](const absl::Status& status) {
    trials->Finished(trial_class, trial, status.ok() ? *agreed : PlanTrials::kFailed);
  });
  return work;
}

CommunicatorImpl::TriedPlan CommunicatorImpl::PlanOrTry(const Group& g, const Buffer& in,
                                                        ReduceOp op,
                                                        const CallOptions& call) const {
  TriedPlan tried{.plan = PlanAllReduce(g, in, call)};
  // An algorithm the rules chose for a large message is tried against the others (plan_trials.h).
  const AllReduceAlgorithm* rules_choice =
      tried.plan.ok() ? FindAllReduceAlgorithm(tried.plan->algorithm) : nullptr;
  if (rules_choice == nullptr || !rules_choice->raced || !options_.explore || g.size() == 1 ||
      tried.plan->algorithm_forced) {
    return tried;
  }
  tried.trial_class = absl::StrFormat(
      "%d|%s|%s|%s|%s|%s", std::bit_width(in.bytes()), DTypeName(in.dtype), ReduceOpName(op),
      tried.plan->codec_inter, tried.plan->codec_intra, call.shares);
  const absl::Duration timeout =
      call.timeout > absl::ZeroDuration() ? call.timeout : options_.timeout;
  const std::vector<std::string> candidates = TrialCandidates(g, tried.plan->algorithm);
  auto model = [&] {
    std::vector<double> seconds;
    for (const std::string& candidate : candidates) {
      seconds.push_back(
          ModelledAllReduceSeconds(candidate, in.bytes(), g.zone_of, tried.plan->shares, *g.links)
              .value_or(0));
    }
    return seconds;
  };
  tried.step = g.trials->Next(tried.trial_class, candidates, CallDeadline(timeout), model);
  CallOptions trial_call = call;
  trial_call.algo = tried.step.algorithm;
  tried.plan = PlanAllReduce(g, in, trial_call);
  if (tried.plan.ok()) tried.plan->why = tried.step.why;
  return tried;
}

std::shared_ptr<Work> CommunicatorImpl::ReduceScatter(const Buffer& in, const Buffer& out,
                                                      ReduceOp op, const CallOptions& call) {
  std::shared_ptr<const Group> g = group();
  absl::Status check = CheckBuffers(in, out, out.count * g->size(), out.count);
  CallDescriptor d{CollectiveKind::kReduceScatter, in.dtype, op, 1, 0, out.count};
  return Launch(g, d, check, "ring", call, [=](CollectiveContext& ctx) {
    if (out.count == 0) return absl::OkStatus();
    return RingReduceScatterBlocks(ctx, in.data, out.data, out.count, in.dtype, op);
  });
}

std::shared_ptr<Work> CommunicatorImpl::AllGather(const Buffer& in, const Buffer& out,
                                                  const CallOptions& call) {
  return AllGather(group(), in, out, call);
}

std::shared_ptr<Work> CommunicatorImpl::AllGather(std::shared_ptr<const Group> g, const Buffer& in,
                                                  const Buffer& out, const CallOptions& call) {
  absl::Status check = CheckBuffers(in, out, in.count, in.count * g->size());
  CallDescriptor d{CollectiveKind::kAllGather, in.dtype, ReduceOp::kSum, 1, 0, in.count};
  return Launch(g, d, check, "ring", call, [=](CollectiveContext& ctx) {
    if (in.count == 0) return absl::OkStatus();
    return RingAllGatherBlocks(ctx, in.data, out.data, in.count, in.dtype);
  });
}

std::shared_ptr<Work> CommunicatorImpl::Broadcast(const Buffer& in, const Buffer& out, int root,
                                                  const CallOptions& call) {
  std::shared_ptr<const Group> g = group();
  absl::Status check = CheckBuffers(in, out, out.count, out.count);
  if (check.ok() && (root < 0 || root >= g->size())) {
    check = absl::InvalidArgumentError(
        absl::StrFormat("root %d is outside a group of %d ranks", root, g->size()));
  }
  CallDescriptor d{CollectiveKind::kBroadcast, out.dtype, ReduceOp::kSum, 1, root, out.count};
  return Launch(g, d, check, "chain", call, [=](CollectiveContext& ctx) {
    if (out.count == 0) return absl::OkStatus();
    if (g->rank == root && in.data != out.data) std::memcpy(out.data, in.data, out.bytes());
    return ChainBroadcast(ctx, out.byte_data(), out.bytes(), root);
  });
}

std::shared_ptr<Work> CommunicatorImpl::Send(const Buffer& buffer, int peer) {
  return PointToPoint(group(), buffer, peer, /*send=*/true);
}

std::shared_ptr<Work> CommunicatorImpl::Recv(const Buffer& buffer, int peer) {
  return PointToPoint(group(), buffer, peer, /*send=*/false);
}

std::shared_ptr<Work> CommunicatorImpl::Send(std::shared_ptr<const Group> g, const Buffer& buffer,
                                             int peer) {
  return PointToPoint(std::move(g), buffer, peer, /*send=*/true);
}

std::shared_ptr<Work> CommunicatorImpl::Recv(std::shared_ptr<const Group> g, const Buffer& buffer,
                                             int peer) {
  return PointToPoint(std::move(g), buffer, peer, /*send=*/false);
}

std::shared_ptr<Work> CommunicatorImpl::PointToPoint(std::shared_ptr<const Group> g,
                                                     const Buffer& buffer, int peer, bool send) {
  CollectiveReport report;
  report.algorithm = "direct";
  report.name =
      absl::StrFormat("%s %s rank %d", send ? "send" : "recv", send ? "to" : "from", peer);
  // A request the peer never matches would hold `buffer` forever: at the deadline the
  // communicator gives up on the group, which ends the request.
  auto work = std::make_shared<Work>(CallDeadline(options_.timeout), [this, report] {
    Abort(absl::DeadlineExceededError(
        absl::StrFormat("%s on rank %d: deadline exceeded", report.name, id_)));
  });
  absl::Status check = CheckBuffers(buffer, buffer, buffer.count, buffer.count);
  if (check.ok() && (peer < 0 || peer >= g->size() || peer == g->rank)) {
    check = absl::InvalidArgumentError(
        absl::StrFormat("peer %d is not another rank of %d", peer, g->size()));
  }
  if (check.ok()) check = health();
  if (!check.ok()) {
    work->Complete(absl::Status(check.code(), absl::StrFormat("%s on rank %d: %s", report.name,
                                                              g->rank, check.message())),
                   report);
    return work;
  }
  uint32_t count;
  {
    MutexLock lock(&mu_);
    if (group_->epoch != g->epoch) {  // The counts belong to the new epoch now.
      work->Complete(MembershipChangedError(g->epoch, group_->epoch,
                                            "the call was made in an epoch that ended"),
                     report);
      return work;
    }
    std::vector<uint32_t>& counts = send ? sends_to_ : receives_from_;
    const int id = g->ids[peer];
    if (static_cast<int>(counts.size()) <= id) counts.resize(id + 1, 0);
    count = counts[id]++;
  }
  const uint64_t tag = MakeTag(EpochSequence(g->epoch, count), Phase::kPointToPoint, 0, 0);
  Channel& channel = *g->channels[peer];
  RequestPtr request = send ? channel.Send(tag, buffer.data, buffer.bytes())
                            : channel.Recv(tag, buffer.data, buffer.bytes());
  (send ? report.bytes_sent : report.bytes_received) = buffer.bytes();
  // Whoever waits for the call sleeps on the work, not in the transport's loop: that loop's own
  // thread must poll for it, and not wait out the hold after a waiter polled.
  request->LeaveToLoopThread();
  const absl::Time start = absl::Now();
  // Runs on the thread that handles the transport's events (its progress thread, or a waiter that
  // polls): hands the user's callbacks to another.
  request->Then([callbacks = callbacks_, work, report, start](const absl::Status& status) mutable {
    report.data_time = absl::Now() - start;
    work->Complete(status, report, callbacks.get());
  });
  return work;
}

std::shared_ptr<Work> CommunicatorImpl::Barrier(const CallOptions& call) {
  return Barrier(group(), call);
}

std::shared_ptr<Work> CommunicatorImpl::Barrier(std::shared_ptr<const Group> g,
                                                const CallOptions& call) {
  return Launch(std::move(g), CallDescriptor{}, absl::OkStatus(), "direct", call,
                [](CollectiveContext&) { return absl::OkStatus(); });
}

std::string CommunicatorImpl::UserKey(const std::string& key) const {
  return absl::StrCat("hmc/user/", options_.world_id, "/", key);
}

absl::Status CommunicatorImpl::PutKey(const std::string& key, const std::string& value) {
  if (coordinator_ == nullptr) return absl::FailedPreconditionError("no coordinator");
  return coordinator_->Put(UserKey(key), value, absl::Now() + options_.connect_timeout);
}

std::vector<absl::StatusOr<std::string>> CommunicatorImpl::GetKeys(
    const std::vector<std::string>& keys, absl::Time deadline) {
  if (coordinator_ == nullptr) {
    return std::vector<absl::StatusOr<std::string>>(
        keys.size(), absl::FailedPreconditionError("no coordinator"));
  }
  std::vector<std::string> scoped;
  for (const std::string& key : keys) scoped.push_back(UserKey(key));
  return coordinator_->GetMany(scoped, deadline);
}

}  // namespace hmc
