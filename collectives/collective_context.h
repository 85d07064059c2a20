#ifndef HMC_COLLECTIVES_COLLECTIVE_CONTEXT_H_
#define HMC_COLLECTIVES_COLLECTIVE_CONTEXT_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "collectives/scratch_pool.h"
#include "collectives/send_pacing.h"
#include "transports/transport.h"

namespace hmc {

// Phases of a collective; part of every message tag.
enum class Phase : uint8_t {
  kArgCheck = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kFold = 5,    // Halving-doubling: extra ranks hand their data to a partner...
  kUnfold = 6,  // ...and get the result back.
  kHalving = 7,
  kDoubling = 8,
  kPointToPoint = 9,  // Communicator::Send/Recv; the sequence field counts per peer.
  kReady = 10,        // CollectiveContext::AwaitMembers.
  kCommit = 11,       // The commit vote of an averaging round.
  kReconcile = 12,    // The first exchange of a membership epoch (averaging.h).
  kState = 13,        // A joining rank downloads the members' state (state_transfer.h).
  kOneShot = 14,      // The one-shot all-reduce (one_shot_allreduce.h).
};

// Tag = sequence number (28 bits) | phase (4) | step (12) | segment (20). Distinct sequence
// numbers let several collectives be in flight on the same channels. A sequence number is the
// membership epoch (14 bits) and the call's number within it (14 bits, 0 for the epoch's
// reconciliation): a call's messages never meet another epoch's, and the tags of earlier epochs
// are all below EpochTagFloor, so that links can drop them (Channel::DiscardTagsBelow).
inline constexpr uint32_t kMaxEpoch = (1u << 14) - 1;
inline uint32_t EpochSequence(uint32_t epoch, uint32_t call) {
  return ((epoch & kMaxEpoch) << 14) | (call & 0x3fffu);
}
inline uint64_t EpochTagFloor(uint32_t epoch) { return uint64_t{epoch & kMaxEpoch} << 50; }

inline uint64_t MakeTag(uint32_t sequence, Phase phase, uint32_t step, uint32_t segment) {
  return (uint64_t{sequence & 0xfffffffu} << 36) | (uint64_t{static_cast<uint8_t>(phase)} << 32) |
         (uint64_t{step & 0xfffu} << 20) | (segment & 0xfffffu);
}

// What an algorithm sees of its communicator for one call: who it is, links to every peer, the
// call's sequence number and deadline. Waits name the peer and the call in their errors.
class CollectiveContext {
 public:
  CollectiveContext(int rank, int size, const std::vector<std::shared_ptr<Channel>>* channels,
                    uint32_t sequence, std::string name, absl::Time deadline, size_t chunk_bytes,
                    ScratchPool* pool)
      : pool_(pool),
        rank_(rank),
        size_(size),
        channels_(channels),
        sequence_(sequence),
        name_(std::move(name)),
        deadline_(deadline),
        chunk_bytes_(chunk_bytes) {}
  // A view of `parent` for running an algorithm over a subgroup: ranks index `members` (global
  // ranks, this rank among them), and `step_base` is added to every step so that several subgroup
  // runs within one call never share a tag on a channel. Requests and scratch memory belong to
  // the parent, which drains them.
  CollectiveContext(CollectiveContext& parent, std::vector<int> members, uint32_t step_base);
  ~CollectiveContext();
  CollectiveContext(const CollectiveContext&) = delete;
  CollectiveContext& operator=(const CollectiveContext&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }  // "allreduce #1.12".
  size_t chunk_bytes() const { return chunk_bytes_; }
  absl::Time deadline() const { return deadline_; }

  struct Pending {
    RequestPtr request;
    int peer;
    bool up_to = false;  // A RecvUpTo: its length is known once it completes.
  };

  // How a send's bytes travel: as the transport chooses (a rendezvous for a large local message),
  // or eagerly, with the message (Channel::SendEager: latency-bound messages).
  enum class Delivery { kAny, kEager };
  // Sends; the request completes when the transport is done with `data`.
  Pending Send(int peer, Phase phase, uint32_t step, uint32_t segment, const void* data,
               size_t bytes, Delivery delivery = Delivery::kAny);
  Pending Recv(int peer, Phase phase, uint32_t step, uint32_t segment, void* data, size_t bytes);
  // A receive of a message of at most `capacity` bytes (compressed data); Wait sets `*received`.
  Pending RecvUpTo(int peer, Phase phase, uint32_t step, uint32_t segment, void* data,
                   size_t capacity);
  // Waits for one request; the error names the call, the peer and the cause. For a RecvUpTo,
  // `received` (if given) gets the message's length.
  absl::Status Wait(const Pending& pending, size_t* received = nullptr);
  absl::Status WaitAll(const std::vector<Pending>& pending);
  // The same `bytes` at `data` to every other member, from the next rank up: a rotated order, so
  // that no rank is everyone's first destination.
  std::vector<Pending> SendToMembers(Phase phase, uint32_t step, const void* data, size_t bytes,
                                     Delivery delivery = Delivery::kAny);
  // A direct all-gather of small blocks, one round trip: sends the `bytes` at
  // `all + bytes * rank()` to every member and receives each member's into `all + bytes * member`.
  absl::Status ExchangeWithMembers(Phase phase, uint32_t step, uint8_t* all, size_t bytes);
  // The same exchange, posted: the caller waits for the requests (WaitAll).
  std::vector<Pending> PostExchangeWithMembers(Phase phase, uint32_t step, uint8_t* all,
                                               size_t bytes);
  // Returns once every member has called it with the same `step` (an exchange of no bytes). For
  // an algorithm whose members would otherwise send into a link that is still busy with a slower
  // member's previous phase.
  absl::Status AwaitMembers(uint32_t step);
  // `cause` as an error of this call about what came from `peer` (a rank in this context).
  absl::Status PeerError(int peer, const absl::Status& cause) const;

  // Pacing (send_pacing.h), off unless enabled: `known_bytes_per_s` is this rank's sending rate as
  // earlier calls measured it (0: not yet). Subgroup views made later inherit both.
  void EnablePacing(double known_bytes_per_s) {
    pacing_ = true;
    send_bytes_per_s_ = known_bytes_per_s;
  }
  // A phase that kept this rank's NIC busy sent at `bytes_per_s`: the rate is at least that.
  void NoteSendRate(double bytes_per_s) {
    if (pacing_) send_bytes_per_s_ = std::max(send_bytes_per_s_, bytes_per_s);
  }
  double send_bytes_per_s() const { return send_bytes_per_s_; }
  // Shares the sending rate among the links to members, in proportion to `bytes_to[member]`, for
  // as long as the result lives.
  SendPacing PaceSends(const std::vector<uint64_t>& bytes_to);
  // Links this call paced, over all its subgroups (for the report).
  int paced_links() const { return paced_links_; }

  // Memory that lives as long as the context: transports may still write into it after an
  // algorithm returns early with an error, until Drain() has seen every request finish.
  uint8_t* Scratch(size_t bytes);
  // Waits until every request this context issued has completed. After a failure the
  // communicator closes its channels first, which completes them promptly.
  void Drain();

  // Ends a named phase of the algorithm: its time since the previous phase ended (or since
  // BeginPhases) goes into the call's report.
  void BeginPhases() { phase_start_ = absl::Now(); }
  void EndPhase(const std::string& name);
  const std::vector<std::pair<std::string, absl::Duration>>& phases() const { return phases_; }

  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  // Bytes this call sent to each peer (indexed by global rank), for egress accounting.
  const std::vector<uint64_t>& bytes_sent_to() const { return bytes_sent_to_; }

 private:
  int GlobalRank(int member) const;
  void CountPacedLinks(int links);  // Into the call's own context, as Send counts bytes.

  ScratchPool* const pool_;
  const int rank_;
  const int size_;
  const std::vector<std::shared_ptr<Channel>>* channels_;
  const uint32_t sequence_;
  const std::string name_;
  const absl::Time deadline_;
  const size_t chunk_bytes_;
  bool pacing_ = false;
  double send_bytes_per_s_ = 0;
  int paced_links_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  std::vector<uint64_t> bytes_sent_to_;
  std::vector<std::pair<std::string, absl::Duration>> phases_;
  absl::Time phase_start_;
  std::vector<RequestPtr> issued_;
  std::vector<ScratchPool::Block> scratch_;
  // Set in a subgroup view only.
  CollectiveContext* const parent_ = nullptr;
  const std::vector<int> members_;
  const uint32_t step_base_ = 0;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_COLLECTIVE_CONTEXT_H_
