#ifndef HMC_COLLECTIVES_COMMUNICATOR_H_
#define HMC_COLLECTIVES_COMMUNICATOR_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/arg_check.h"
#include "collectives/butterfly.h"
#include "collectives/codecs/codec.h"
#include "collectives/collective_context.h"
#include "collectives/egress.h"
#include "collectives/link_probe.h"
#include "collectives/plan_trials.h"
#include "collectives/scratch_pool.h"
#include "collectives/stream_probe.h"
#include "collectives/tuner.h"
#include "collectives/work.h"
#include "collectives/worker_pool.h"
#include "core/buffer.h"
#include "core/coordinator_client.h"
#include "core/mutex.h"
#include "core/options.h"
#include "core/peer_table.h"
#include "transports/transport.h"

namespace hmc {

// Per-call overrides of the communicator's options.
struct CallOptions {
  std::string algo;                               // Empty: the communicator's `algo`.
  absl::Duration timeout = absl::ZeroDuration();  // Zero: the communicator's `timeout`.
  std::string codec_inter;                        // Empty: the communicator's `codec_inter`.
  std::string codec_intra;                        // Empty: the communicator's `codec_intra`.
  std::string shares;                             // Empty: the communicator's `shares`.
  // Error feedback for lossy codecs: the caller keeps one per tensor (gradient bucket) and passes
  // it with that tensor every step; null: none. It must outlive the call.
  CodecFeedback* feedback = nullptr;
};

// A group of ranks that run collectives together. Every rank must issue the same collectives in
// the same order (as with MPI and NCCL); each returns at once with a Work to wait on, and several
// may be in flight. Arguments are compared across ranks before data moves (a mismatch fails that
// call on every rank and leaves the communicator usable). Any other failure — a peer that dies,
// a deadline — fails the call on every rank with a message naming the peer, and the communicator
// then refuses further calls: recovery is a new communicator (elastic membership comes later).
class Communicator {
 public:
  // Joins the coordinator named in `options`, connects to every peer over TCP and returns when
  // the group is complete (or with an error naming who is missing at connect_timeout).
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const Options& options);
  // A communicator over channels made elsewhere (the inproc transport in tests); `zones` names
  // each rank's zone (cycled; empty: everyone in options.zone).
  static std::unique_ptr<Communicator> CreateFromChannels(
      int rank, std::vector<std::shared_ptr<Channel>> channels, const Options& options,
      const std::vector<std::string>& zones = {});
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(channels_.size()); }
  const PeerTable& peers() const { return peers_; }

  // out = op over every rank's in; in may equal out.
  std::shared_ptr<Work> AllReduce(const Buffer& in, const Buffer& out, ReduceOp op,
                                  const CallOptions& call = {});
  // in: size()·out.count elements; out: this rank's block, reduced.
  std::shared_ptr<Work> ReduceScatter(const Buffer& in, const Buffer& out, ReduceOp op,
                                      const CallOptions& call = {});
  // in: count elements; out: size()·count, every rank's block in rank order.
  std::shared_ptr<Work> AllGather(const Buffer& in, const Buffer& out,
                                  const CallOptions& call = {});
  // The root's in is copied to every rank's out (in is read on the root only; may equal out).
  std::shared_ptr<Work> Broadcast(const Buffer& in, const Buffer& out, int root,
                                  const CallOptions& call = {});
  std::shared_ptr<Work> Barrier(const CallOptions& call = {});

  // Point to point, not collective: the n-th Send to a peer matches that peer's n-th Recv from
  // this rank (MPI's ordering rule). Lengths must match: a mismatch fails the link to that peer,
  // naming both lengths. They are posted to the transport at once and complete without a worker.
  std::shared_ptr<Work> Send(const Buffer& buffer, int peer);
  std::shared_ptr<Work> Recv(const Buffer& buffer, int peer);

  // OK while usable; otherwise why not.
  absl::Status health() const;
  // Bytes that crossed each link so far, indexed by peer rank.
  std::vector<LinkStats> link_stats() const;
  // The streams per peer in use, and what the probe at creation measured to choose them.
  const StreamChoice& stream_choice() const { return stream_choice_; }
  // Round trips and rates between every pair of ranks, measured at creation (option `probe`) or
  // by the last ProbeLinks; unmeasured (size 0) without a probe.
  LinkMatrix links() const;
  // Measures the link matrix again (a few seconds at most) and shares it through the
  // coordinator. Collective: every rank calls it, with no other call in flight.
  absl::Status ProbeLinks();
  // The coordinator's key-value store, for what ranks share outside collectives (a collaborative
  // optimizer's progress). Keys are scoped to this world ("hmc/user/WORLD/key"); a put replaces
  // the value; GetKeys reads many keys in one round trip, each waiting until it exists or the
  // deadline. FailedPrecondition without a coordinator. Thread-safe, and independent of
  // collectives in flight.
  absl::Status PutKey(const std::string& key, const std::string& value);
  std::vector<absl::StatusOr<std::string>> GetKeys(const std::vector<std::string>& keys,
                                                   absl::Time deadline);
  // The plan the tuner makes for an all-reduce of `in` with these call options.
  absl::StatusOr<AllReducePlan> PlanAllReduce(const Buffer& in, const CallOptions& call = {}) const;

 private:
  using Algorithm = std::function<absl::Status(CollectiveContext&)>;

  Communicator(int rank, std::vector<std::shared_ptr<Channel>> channels, const Options& options);
  // `chunk_bytes` 0: the option's. `plan_detail` goes into the report.
  std::shared_ptr<Work> Launch(CallDescriptor descriptor, absl::Status local_check,
                               std::string algorithm_name, const CallOptions& call,
                               Algorithm algorithm, size_t chunk_bytes = 0,
                               std::string plan_detail = "");
  // The codec for a spec, made once and kept; null for "none".
  absl::StatusOr<const Codec*> CodecFor(const std::string& spec);
  // Egress of one call from this rank: bytes to other zones and their cost.
  void AccountEgress(const std::vector<uint64_t>& bytes_sent_to, CollectiveReport& report) const;
  // Why a buffer pair cannot be used, checked before the call is launched.
  absl::Status CheckBuffers(const Buffer& in, const Buffer& out, size_t in_count,
                            size_t out_count) const;
  void Abort(const absl::Status& why);
  std::shared_ptr<Work> PointToPoint(const Buffer& buffer, int peer, bool send);
  // A user key scoped to this world in the coordinator's store.
  std::string UserKey(const std::string& key) const;
  // Each rank's zone as a small integer, in order of first appearance.
  std::vector<int> ZoneIndexes() const;
  // The algorithms an auto all-reduce tries, the rules' choice first.
  std::vector<std::string> TrialCandidates(const std::string& rules_choice) const;
  // Measures the ring's links and sets every channel's active streams (stream_probe.cc).
  absl::Status ProbeStreams();

  const int rank_;
  const Options options_;
  std::vector<std::shared_ptr<Channel>> channels_;
  PeerTable peers_;
  StreamChoice stream_choice_;
  PriceTable prices_ = PriceTable::Default();
  uint32_t probe_generation_ = 0;  // Keys each probe's rows apart in the coordinator.
  std::unique_ptr<CoordinatorClient> coordinator_;
  std::unique_ptr<Transport> transport_;
  ScratchPool scratch_;
  std::unique_ptr<WorkerPool> pool_;
  PlanTrials trials_;

  mutable Mutex mu_;
  uint32_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<uint32_t> sends_to_ ABSL_GUARDED_BY(mu_);  // Point-to-point counts per peer.
  std::vector<uint32_t> receives_from_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  // Replaced whole by each probe; calls plan from a shared snapshot instead of copying it.
  std::shared_ptr<const LinkMatrix> links_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<const LinkMatrix>();
  // This rank's sending rate, the highest any call measured (CollectiveContext::NoteSendRate),
  // bytes/s; 0 until one has.
  std::atomic<double> send_bytes_per_s_{0};
  std::map<std::string, std::unique_ptr<Codec>> codecs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_COMMUNICATOR_H_
