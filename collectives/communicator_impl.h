#ifndef HMC_COLLECTIVES_COMMUNICATOR_IMPL_H_
#define HMC_COLLECTIVES_COMMUNICATOR_IMPL_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/arg_check.h"
#include "collectives/averaging.h"
#include "collectives/butterfly.h"
#include "collectives/codecs/codec.h"
#include "collectives/collective_context.h"
#include "collectives/communicator.h"
#include "collectives/egress.h"
#include "collectives/group.h"
#include "collectives/joiner_links.h"
#include "collectives/link_probe.h"
#include "collectives/options.h"
#include "collectives/scratch_pool.h"
#include "collectives/state_transfer.h"
#include "collectives/stream_probe.h"
#include "collectives/tuner.h"
#include "collectives/work.h"
#include "collectives/worker_pool.h"
#include "core/buffer.h"
#include "core/coordinator_client.h"
#include "core/mutex.h"
#include "core/peer_table.h"
#include "transports/transport.h"

namespace hmc {

// An algorithm's early data (CallDescriptor::early_bytes): the argument check sends `data` and,
// after a passing verdict, fills `into` for the run.
struct EarlySend {
  const void* data = nullptr;
  std::shared_ptr<EarlyData> into;
};

// What runs a Communicator (communicator.h, where its public methods are described): the
// current epoch's group, the calls' launch and planning, membership and averaging rounds.
class CommunicatorImpl {
 public:
  static absl::StatusOr<std::unique_ptr<CommunicatorImpl>> Create(const Options& options);
  static std::unique_ptr<CommunicatorImpl> CreateFromChannels(
      int rank, std::vector<std::shared_ptr<Channel>> channels, const Options& options,
      const std::vector<std::string>& zones = {});
  ~CommunicatorImpl();

  int rank() const { return group()->rank; }
  int size() const { return group()->size(); }
  int id() const { return id_; }
  bool joined_running_group() const { return joined_running_group_; }
  uint32_t epoch() const { return group()->epoch; }
  PeerTable peers() const { return group()->peers; }
  std::shared_ptr<const Group> group() const;

  std::shared_ptr<Work> AllReduce(const Buffer& in, const Buffer& out, ReduceOp op,
                                  const CallOptions& call = {});
  std::shared_ptr<Work> ReduceScatter(const Buffer& in, const Buffer& out, ReduceOp op,
                                      const CallOptions& call = {});
  std::shared_ptr<Work> AllGather(const Buffer& in, const Buffer& out,
                                  const CallOptions& call = {});
  std::shared_ptr<Work> Broadcast(const Buffer& in, const Buffer& out, int root,
                                  const CallOptions& call = {});
  std::shared_ptr<Work> Barrier(const CallOptions& call = {});
  // The same calls in group `g` rather than the current one: where g's epoch has ended, each fails
  // with MembershipChanged instead of running in the next epoch. The probes make theirs so: a
  // step that ran in the next epoch on some ranks only would leave their call counts there apart,
  // and no call of that epoch would match again.
  std::shared_ptr<Work> AllReduce(std::shared_ptr<const Group> g, const Buffer& in,
                                  const Buffer& out, ReduceOp op);
  std::shared_ptr<Work> AllGather(std::shared_ptr<const Group> g, const Buffer& in,
                                  const Buffer& out, const CallOptions& call = {});
  std::shared_ptr<Work> Barrier(std::shared_ptr<const Group> g, const CallOptions& call = {});
  std::shared_ptr<Work> Send(std::shared_ptr<const Group> g, const Buffer& buffer, int peer);
  std::shared_ptr<Work> Recv(std::shared_ptr<const Group> g, const Buffer& buffer, int peer);

  absl::StatusOr<AverageOutcome> Average(const Buffer& buffer, double weight,
                                         const CallOptions& call = {},
                                         const SharedState* state = nullptr);
  absl::StatusOr<std::unique_ptr<AverageRound>> BeginAverage(double weight,
                                                             const CallOptions& call = {},
                                                             const SharedState* state = nullptr);
  bool state_stale() const;
  uint64_t averaging_rounds() const;

  std::shared_ptr<Work> Send(const Buffer& buffer, int peer);
  std::shared_ptr<Work> Recv(const Buffer& buffer, int peer);

  absl::Status health() const;
  void ApplyMembership(const PeerTable& table);
  std::vector<LinkStats> link_stats() const;
  const StreamChoice& stream_choice() const { return stream_choice_; }
  const std::string& placement() const { return placement_; }
  LinkMatrix links() const;
  absl::Status ProbeLinks() { return ProbeLinks(group()); }
  absl::Status PutKey(const std::string& key, const std::string& value);
  std::vector<absl::StatusOr<std::string>> GetKeys(const std::vector<std::string>& keys,
                                                   absl::Time deadline);
  absl::StatusOr<AllReducePlan> PlanAllReduce(const Buffer& in,
                                              const CallOptions& call = {}) const {
    return PlanAllReduce(*group(), in, call);
  }

 private:
  // A round's steps (fault_tolerant_average.cc), which its AverageRoundImpl takes: its argument
  // checks; entering the round once the epoch the members agreed on is here (sets `round`;
  // returns whether this rank's contribution is stale); the start of an attempt (its group);
  // leaving the round without a commit; the verdict of the next epoch's reconciliation on an
  // attempt that membership interrupted (kNone: none came); the committed round's outcome.
  friend class AverageRoundImpl;
  struct DecidedRound {
    RoundVerdict verdict = RoundVerdict::kNone;
    uint32_t epoch = 0;  // Of the attempt that committed.
    std::vector<int> ids;
    std::vector<double> weights;
  };
  absl::Status CheckAveragePart(const Buffer& part) const;
  absl::Status CheckAverageWeight(double weight) const;
  absl::StatusOr<bool> EnterRound(bool with_state, uint64_t& round);
  std::shared_ptr<const Group> BeginAttempt();
  void LeaveRound(uint64_t round);
  DecidedRound AwaitRoundVerdict(uint32_t attempt_epoch, uint64_t round);
  absl::StatusOr<AverageOutcome> CommitRound(AverageOutcome outcome, DecidedRound committed);
  using Algorithm = std::function<absl::Status(CollectiveContext&)>;

  // `probe`: the link probe a rank that joins a running group plans its first epoch with.
  CommunicatorImpl(int id, std::vector<std::shared_ptr<Channel>> channels, const PeerTable& table,
                   const Options& options, LinkProbeRecord probe = {});
  // Runs `algorithm` on a worker in the group `g` (the current one when the call was made).
  // `chunk_bytes` 0: the option's. `plan_detail` goes into the report. `send_early` (set only with
  // a descriptor that announces early bytes) leaves with the argument check.
  // A call's sending rate (kept for pacing the next calls), phases, bytes and egress, into its
  // report.
  void RecordTraffic(const CollectiveContext& ctx, const Group& g, CollectiveReport& report);
  std::shared_ptr<Work> Launch(std::shared_ptr<const Group> g, CallDescriptor descriptor,
                               absl::Status local_check, std::string algorithm_name,
                               const CallOptions& call, Algorithm algorithm, size_t chunk_bytes = 0,
                               std::string plan_detail = "", AveragingAttempt* attempt = nullptr,
                               EarlySend send_early = {});
  // The argument check of a call of `g` on the worker (with `send_early`, where set);
  // `descriptors` (an averaging attempt's) gets every member's. OK, a mismatch on every rank
  // (InvalidArgument; this rank's own reason where it has one), or the failure that ended the
  // exchange; `verdict`: whether the outcome is the check's, the same on every rank.
  absl::Status CheckArguments(CollectiveContext& ctx, const Group& g,
                              const CallDescriptor& descriptor, const absl::Status& local_check,
                              const EarlySend& send_early, std::vector<CallDescriptor>* descriptors,
                              bool* verdict) const;
  // How the check's messages travel in `g` (the check_exchange option; the same on every member).
  CheckExchange CheckExchangeIn(const Group& g) const;
  // Before an averaging attempt's all-reduce: takes every member's weight from the argument check
  // and, when a member is stale, transfers the shared state.
  absl::Status PrepareAttempt(CollectiveContext& ctx, const std::vector<CallDescriptor>& all,
                              AveragingAttempt* attempt);
  // After an averaging attempt's all-reduce left the whole sum here: records that, then votes;
  // commits the round if every member voted and no newer epoch was reconciled meanwhile.
  absl::Status VoteOnAttempt(CollectiveContext& ctx, const Group& g, AveragingAttempt* attempt);
  // An all-reduce in group `g`; with `round` set, the attempt of an averaging round (averaging.cc).
  std::shared_ptr<Work> LaunchAllReduce(std::shared_ptr<const Group> g, const Buffer& in,
                                        const Buffer& out, ReduceOp op, const CallOptions& call,
                                        AveragingAttempt* round);
  // The codec for a spec, made once and kept; null for "none".
  absl::StatusOr<const Codec*> CodecFor(const std::string& spec);
  // Egress of one call from this rank: bytes to other zones and their cost.
  void AccountEgress(const Group& g, const std::vector<uint64_t>& bytes_sent_to,
                     CollectiveReport& report) const;
  // Why a buffer pair cannot be used, checked before the call is launched.
  absl::Status CheckBuffers(const Buffer& in, const Buffer& out, size_t in_count,
                            size_t out_count) const;
  // Makes the communicator unusable and closes every link.
  void Abort(const absl::Status& why);
  std::shared_ptr<Work> PointToPoint(std::shared_ptr<const Group> g, const Buffer& buffer, int peer,
                                     bool send);
  // The call deadline for a timeout starting now: capped by Create's deadline while it probes.
  absl::Time CallDeadline(absl::Duration timeout) const;

  // Membership (membership.cc). A link to stable id `id` failed: every call of the current epoch
  // ends, and the coordinator hears of it.
  void OnPeerLost(int id, const absl::Status& why);
  // Ends every call of epochs before `epoch` on every link, with `why`.
  void DiscardEpochsBefore(uint32_t epoch, const absl::Status& why);
  // The status a call of group `g` ends with after `failure`: MembershipChanged once a newer
  // epoch is adopted (waiting for it a bounded time); otherwise `failure`, and the communicator
  // becomes unusable.
  absl::Status AfterFailure(const Group& g, const absl::Status& failure);
  // Opens channels to the ranks the table names as joining (they connect here).
  void ExpectJoiners(const PeerTable& table);
  // The coordinator's connection is gone: calls go on, but no new epoch can start.
  void OnCoordinatorLost();
  // Waits until an epoch after `epoch` is adopted, or `deadline`; false if none was.
  bool AwaitEpochAfter(uint32_t epoch, absl::Time deadline);
  // The membership thread: reports failures to the coordinator and adopts new epochs.
  void MembershipLoop();
  // Makes the group of `epoch`'s table current and reconciles the open averaging round in it.
  void Adopt(uint32_t epoch);
  // The epoch the membership thread adopts now; 0: none. An epoch that only adds members waits
  // for the round boundary the members agreed on (agreed_epoch_).
  uint32_t EpochToAdopt() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first exchange of every epoch: members share where they stand in the averaging rounds
  // and each takes the verdict on its open round (averaging.h).
  void Reconcile(const std::shared_ptr<const Group>& g);
  // A user key scoped to this world in the coordinator's store.
  std::string UserKey(const std::string& key) const;
  // An all-reduce's plan: the rules' (the tuner's), or, while the trials of its size class still
  // run, the candidate whose turn it is (trial_class names that class; step.trial >= 0).
  struct TriedPlan {
    absl::StatusOr<AllReducePlan> plan;
    std::string trial_class;
    PlanTrials::Step step;
  };
  TriedPlan PlanOrTry(const Group& g, const Buffer& in, ReduceOp op, const CallOptions& call) const;
  // A timed call of the plan trials: `run`, then the slowest rank's time agreed and reported.
  std::shared_ptr<Work> LaunchTrial(std::shared_ptr<const Group> g, const CallDescriptor& d,
                                    const absl::Status& check, const AllReducePlan& plan,
                                    const CallOptions& call, Algorithm run,
                                    const std::string& detail, AveragingAttempt* round,
                                    const TriedPlan& tried);
  // The algorithms an auto all-reduce in `g` tries, the rules' choice first.
  std::vector<std::string> TrialCandidates(const Group& g, const std::string& rules_choice) const;
  absl::StatusOr<AllReducePlan> PlanAllReduce(const Group& g, const Buffer& in,
                                              const CallOptions& call) const;
  // Create's probes, as the options ask, ended by Create's deadline; again in the next epoch
  // where a member was lost meanwhile.
  absl::Status ProbeAtCreation(absl::Time deadline);
  // The probes, once, every step in group `g`.
  absl::Status ProbeGroup(const std::shared_ptr<const Group>& g);
  // Measures the links of `g`; the current group plans with them.
  absl::Status ProbeLinks(const std::shared_ptr<const Group>& g);
  // The link probe's steps (link_probe.cc): this rank's incoming round trips; striping and
  // streams per link class; this rank's incoming rates with every link busy; the auto codec's
  // speed on the slowest rank; every rank's rows, through the coordinator where there is one
  // (where tools and later communicators read them), else over the channels.
  absl::Status MeasureRoundTrips(const std::shared_ptr<const Group>& g, LinkMatrix& matrix);
  void StripeByLinkClass(const Group& g, const LinkMatrix& matrix);
  absl::Status MeasureRates(const std::shared_ptr<const Group>& g, LinkMatrix& matrix);
  absl::StatusOr<double> SlowestAutoCodecSpeed(const std::shared_ptr<const Group>& g);
  absl::Status ShareLinkRows(const std::shared_ptr<const Group>& g, LinkMatrix& matrix);
  // Measures the ring's links and sets every channel's active streams (stream_probe.cc).
  absl::Status ProbeStreams(const std::shared_ptr<const Group>& g);
  // Its steps: every ring link's round trip (from rank r to r + 1), shared; this rank's incoming
  // ring link's rate while it sends to its successor through `streams` (or only its end marker);
  // the group's choice from every rank's (`choice` holds this rank's, `rtt_ms` the round trip
  // into each rank), set on the channels.
  absl::StatusOr<std::vector<int64_t>> RingLinkRoundTrips(const std::shared_ptr<const Group>& g);
  absl::StatusOr<double> MeasureRingLink(const std::shared_ptr<const Group>& g, bool marker_only,
                                         absl::Duration window, int streams);
  absl::Status SetStreamsFromChoices(const std::shared_ptr<const Group>& g, StreamChoice choice,
                                     const std::vector<double>& rtt_ms);
  // Rank 0 keeps the newest link probe in the coordinator (LinkProbeKey) for ranks that join
  // later; an empty record where links were not probed.
  absl::Status RecordProbe();

  const int id_;
  const Options options_;
  bool joined_running_group_ = false;
  StreamChoice stream_choice_;
  std::string placement_;
  PriceTable prices_ = PriceTable::Default();
  // Key each probe's rows apart in the coordinator: its epoch, and its count within the epoch.
  uint32_t probe_epoch_ = 0;
  uint32_t probes_in_epoch_ = 0;
  std::unique_ptr<CoordinatorClient> coordinator_;
  std::unique_ptr<Transport> transport_;
  ScratchPool scratch_;
  std::shared_ptr<WorkerPool> pool_;  // Shared with the works (Work::QueuedAs).
  // Where the OnDone callbacks of point-to-point calls (and so libtorch continuations) run: they
  // may block without stalling the transport's progress thread, which completes those calls.
  // Shared with the completion handlers, which can outlive this communicator.
  std::shared_ptr<WorkerPool> callbacks_;
  std::thread membership_thread_;
  absl::Time setup_deadline_ = absl::InfiniteFuture();  // Create's, while it probes.

  mutable Mutex mu_;
  // The current epoch's group; calls plan from a shared snapshot of it.
  std::shared_ptr<const Group> group_ ABSL_GUARDED_BY(mu_);
  // Every channel this rank opened, by stable id; null at id_ and where none was. Grows as ranks
  // join.
  std::vector<std::shared_ptr<Channel>> world_channels_ ABSL_GUARDED_BY(mu_);
  PeerTable world_table_ ABSL_GUARDED_BY(mu_);  // The newest table, by stable id.
  // A join starts its epoch at a call boundary: tables that only add members to the current
  // group, kept by epoch until the members agree, in an averaging round's commit vote, to take
  // one of them in after that round (agreed_epoch_: the newest any member held at a vote). A
  // round in flight is not ended by a join. Empty for a newcomer, which takes every table at once.
  std::map<uint32_t, PeerTable> join_tables_ ABSL_GUARDED_BY(mu_);
  uint32_t agreed_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest link probe; each epoch's links follow from it and the table (WorldLinks).
  LinkProbeRecord probe_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, std::string>> failures_to_report_ ABSL_GUARDED_BY(mu_);
  // Epochs in which an averaging round committed, for the coordinator's log of recovery times
  // (rank 0 of each epoch tells it); the newest epoch queued so far.
  std::vector<uint32_t> resumed_to_report_ ABSL_GUARDED_BY(mu_);
  uint32_t resumed_epoch_ ABSL_GUARDED_BY(mu_) = 1;
  // Whether the coordinator was told that this rank called Average: the program reached its
  // fault-tolerant part, and ranks may join (its plain collectives before that, such as a
  // parameter broadcast, would be ended by a join's epoch). Told by the membership thread.
  bool ready_told_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_to_tell_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool coordinator_lost_ ABSL_GUARDED_BY(mu_) = false;
  // Why each epoch began: who failed, and the cause.
  std::map<uint32_t, std::string> epoch_causes_ ABSL_GUARDED_BY(mu_);
  uint32_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;      // Within the epoch; 0 is reconciliation's.
  std::vector<uint32_t> sends_to_ ABSL_GUARDED_BY(mu_);  // Point-to-point counts by stable id.
  std::vector<uint32_t> receives_from_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  RoundLedger ledger_ ABSL_GUARDED_BY(mu_);        // Where this rank stands in averaging rounds.
  bool state_stale_ ABSL_GUARDED_BY(mu_) = false;  // A joiner, until its state download.
  bool state_tried_ ABSL_GUARDED_BY(mu_) = false;  // A download began: a next one resumes it.
  // This rank's sending rate, the highest any call measured (CollectiveContext::NoteSendRate),
  // bytes/s; 0 until one has.
  std::atomic<double> send_bytes_per_s_{0};
  std::map<std::string, std::unique_ptr<Codec>> codecs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_COMMUNICATOR_IMPL_H_
