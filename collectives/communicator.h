#ifndef HMC_COLLECTIVES_COMMUNICATOR_H_
#define HMC_COLLECTIVES_COMMUNICATOR_H_

// hmc's public API: a communicator, its collectives and averaging. This header and what it
// includes are what an installed hmc exposes; how calls run (CommunicatorImpl, the algorithms,
// the transports) stays behind it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/average_outcome.h"
#include "collectives/codecs/codec.h"
#include "collectives/options.h"
#include "collectives/work.h"
#include "core/buffer.h"
#include "core/peer_table.h"
#include "core/reduce_op.h"

namespace hmc {

// Internal types some accessors return: include their headers (not installed) to use them.
class Channel;
class CommunicatorImpl;
struct AllReducePlan;  // collectives/tuner.h
struct Group;          // collectives/group.h
struct LinkMatrix;     // collectives/link_probe.h
struct LinkStats;      // transports/transport.h
struct StreamChoice;   // collectives/stream_probe.h

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

// A fault-tolerant averaging round whose buffer comes in parts (Communicator::BeginAverage), such
// as a training step's gradient buckets, which backward makes ready one by one: each part's
// all-reduce starts when it is added, while the caller goes on, and the round's one commit vote
// follows the last part's. The outcome is Average's over the parts together: on OK every part
// holds its average, bit-identical on every rank that returns OK; on an error every part is as it
// was, on every survivor. A retry in the next epoch averages every part again. Every rank adds
// parts of the same types and counts in the same order and marks the same one last (the argument
// checks compare them). Use it from one thread at a time, and end it before its communicator.
class AverageRound {
 public:
  // A round dropped before its Finish waits for its parts' calls and ends on this rank without
  // a commit; its parts are left as they were (the other members may have committed it).
  virtual ~AverageRound() = default;
  // Starts averaging `part` (f32 or f64), which must stay alive and unchanged until Finish
  // returns. `last`: no part follows.
  virtual absl::Status Add(const Buffer& part, bool last) = 0;
  // Waits for every part's all-reduce and the vote, retries the round in the next epoch where a
  // member was lost meanwhile, and returns the outcome (Average's). Once, after the last part.
  virtual absl::StatusOr<AverageOutcome> Finish() = 0;
};

// A group of ranks that run collectives together. Every rank must issue the same collectives in
// the same order (as with MPI and NCCL); each returns at once with a Work to wait on, and several
// may be in flight. Arguments are compared across ranks before data moves (a mismatch fails that
// call on every rank and leaves the communicator usable).
//
// Membership moves in epochs (group.h). When a member fails (its connection breaks, its links stop
// delivering, or the coordinator misses its heartbeats), the coordinator starts the next epoch
// without it; every call of the old epoch ends on every survivor with MembershipChanged ("epoch
// E -> E'; retry"), and calls made after that run in the new epoch over the survivors, who keep
// their links. rank() and size() are the dense rank and size of the current epoch; id() is the
// stable rank this process joined with. Below `min_ranks` members, after this rank was removed,
// when no new epoch comes after a failure, and in a communicator without a coordinator, a failure
// leaves the communicator unusable instead. Average() gives the stronger guarantee: every survivor
// ends each round with the same outcome.
class Communicator {
 public:
 public:
  // Joins the coordinator named in `options`, connects to every peer over TCP and returns when
  // the group is complete (or with an error naming who is missing at connect_timeout). When the
  // group is running already, this rank joins it: it gets the next unused id, connects to the
  // members and becomes one in the next epoch (joined_running_group() is then true; the state the
  // members keep is the caller's to fetch, see Average's `state`).
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const Options& options);
  // A communicator over channels made elsewhere (the inproc transport in tests); `zones` names
  // each rank's zone (cycled; empty: everyone in options.zone).
  static std::unique_ptr<Communicator> CreateFromChannels(
      int rank, std::vector<std::shared_ptr<Channel>> channels, const Options& options,
      const std::vector<std::string>& zones = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Dense rank and size in the current epoch; the stable id this process joined with.
  int rank() const;
  int size() const;
  int id() const;
  // Whether this rank joined a group that was running already (it has no history of its own).
  bool joined_running_group() const;
  uint32_t epoch() const;
  // The current epoch's members: by dense rank, each entry's `rank` its stable id.
  PeerTable peers() const;
  std::shared_ptr<const Group> group() const;

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

  // Fault-tolerant weighted averaging (averaging.h): `buffer` (f32 or f64, the same count on
  // every rank) becomes sum(weight_i * buffer_i) / sum(weight_i) over the round's contributors,
  // bit-identical on every rank that returns OK. Survivors of a failure during the round agree
  // on its outcome: it commits over the members of the epoch it ran in (all of whom had sent their
  // part), or it is retried once in the next epoch with the weights of those who remain. Returns
  // the contributors and their weights; an error leaves `buffer` as it was, on every survivor.
  // Blocking; no other call of this communicator may be in flight meanwhile.
  //
  // `state` (state_transfer.h): tensors every member keeps identical, passed by every member or
  // by none. A rank that joined a running group is stale until its first round: in that round it
  // contributes weight 0 (its buffer was computed from stale state) and downloads `state` from
  // the members before the all-reduce, so that after the round it holds what they hold. The
  // members must not change `state` during the call.
  absl::StatusOr<AverageOutcome> Average(const Buffer& buffer, double weight,
                                         const CallOptions& call = {},
                                         const SharedState* state = nullptr);
  // The same round with its buffer in parts (AverageRound): enters the round (once a join the
  // members agreed on took effect) and returns. A stale rank downloads `state` in the last part's
  // call. No other call of this communicator may be made until the round's Finish returned, and
  // `state` must not change.
  absl::StatusOr<std::unique_ptr<AverageRound>> BeginAverage(double weight,
                                                             const CallOptions& call = {},
                                                             const SharedState* state = nullptr);
  // Whether this rank still has to download the members' state (it joined a running group and
  // no Average with `state` completed its download yet).
  bool state_stale() const;
  // Ranks join a running group only once every member has called Average: the program is then
  // in its fault-tolerant part.
  //
  // Averaging rounds committed so far: the number of the next round. A rank that joined a running
  // group starts from the group's count.
  uint64_t averaging_rounds() const;

  // Point to point, not collective: the n-th Send to a peer (a dense rank) matches that peer's
  // n-th Recv from this rank within an epoch (MPI's ordering rule). Lengths must match: a mismatch
  // fails the link to that peer, naming both lengths. They are posted to the transport at once and
  // complete without a worker; their OnDone callbacks run on a thread of their own (they may
  // block, delaying only later callbacks). Wait() without a deadline gives up at the `timeout`
  // option (and then the communicator is unusable: the peer is out of step).
  std::shared_ptr<Work> Send(const Buffer& buffer, int peer);
  std::shared_ptr<Work> Recv(const Buffer& buffer, int peer);

  // OK while usable; otherwise why not.
  absl::Status health() const;
  // Starts the epoch of `table` (a coordinator's peer table, indexed by stable id) if it is newer
  // than the current one. The coordinator's updates arrive here; tests without a coordinator may
  // call it. Returns at once: the epoch is adopted on the membership thread.
  void ApplyMembership(const PeerTable& table);
  // Bytes that crossed each link so far, indexed by peer rank.
  std::vector<LinkStats> link_stats() const;
  // The streams per peer in use, and what the probe at creation measured to choose them.
  const StreamChoice& stream_choice() const;
  // Where this rank's threads run (core/placement.h), as Communicator::Create bound them.
  const std::string& placement() const;
  // Round trips and rates between every pair of the current epoch's ranks (by dense rank),
  // measured at creation (option `probe`) or by the last ProbeLinks; unmeasured (size 0) without
  // a probe. A new epoch keeps the measurements of the links it kept.
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
  explicit Communicator(std::unique_ptr<CommunicatorImpl> impl);

  std::unique_ptr<CommunicatorImpl> impl_;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_COMMUNICATOR_H_
