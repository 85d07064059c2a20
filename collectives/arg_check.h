#ifndef HMC_COLLECTIVES_ARG_CHECK_H_
#define HMC_COLLECTIVES_ARG_CHECK_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "collectives/collective_context.h"
#include "core/dtype.h"
#include "core/reduce_op.h"

namespace hmc {

enum class CollectiveKind : uint8_t {
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kBarrier = 5,
  kAverage = 6,  // An attempt of a fault-tolerant averaging round (averaging.h).
};

const char* CollectiveName(CollectiveKind kind);

// What every rank must agree on before data moves.
struct CallDescriptor {
  CollectiveKind kind = CollectiveKind::kBarrier;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  uint8_t algorithm = 0;
  int32_t root = 0;
  uint64_t count = 0;  // Per-rank element count (the block for reduce-scatter and all-gather).
  bool locally_invalid = false;  // This rank's own checks refused its arguments.
  uint32_t plan = 0;             // Fingerprint of the codecs and shares this rank will use.
  uint64_t round = 0;            // Average: the round (compared).
  double weight = 0;             // Average: this rank's weight (shared, not compared).
  uint64_t state = 0;            // Average: the shared state's fingerprint, 0: none (compared).
  bool stale = false;            // Average: this rank downloads the state (shared).
  uint32_t part = 0;             // Average: the part of the round (compared).
  bool closes_round = false;     // Average: the round's last part (compared).
  // Bytes of data this rank sent before the verdict (shared): an algorithm whose first messages
  // leave with the descriptors makes the check cost no round trip of its own. Sent to every member
  // (`early_to` -1: the one-shot all-reduce), their first RideBytes(early_bytes) travel in the
  // descriptor's own message and the rest, if any, as one message tagged (early_phase, 0, 0); sent
  // to one member (the ring's first step, to the next rank), all of it goes as messages of
  // `early_segment_bytes` (at least kMinEarlySegmentBytes; the last one shorter), the k-th tagged
  // (early_phase, 0, k).
  uint64_t early_bytes = 0;
  Phase early_phase = Phase::kOneShot;
  int32_t early_to = -1;
  uint64_t early_segment_bytes = 0;

  // Of the early data, what travels in the descriptor's messages, and the lengths of the messages
  // that follow them to `member`.
  uint64_t Ride() const;
  std::vector<uint64_t> RestMessagesTo(int member) const;
};

// The most a rank sends early; a member announcing more is not this build (its message is left to
// the link's bound on unexpected messages).
inline constexpr uint64_t kMaxEarlyBytes = uint64_t{1} << 20;
// The most of the early data that rides in the descriptor's message: a small vector then costs one
// message per member, not two (on one host the second message, not a round trip, is what a small
// call's check cost). Every check receives up to this much from every member, whether or not it
// sends any itself, so that a member whose arguments differ cannot overrun the receive.
inline constexpr uint64_t kMaxRideBytes = uint64_t{64} << 10;
inline uint64_t RideBytes(uint64_t early_bytes) { return std::min(early_bytes, kMaxRideBytes); }
// The smallest segment a member may announce for its early data (the least chunk_bytes).
inline constexpr uint64_t kMinEarlySegmentBytes = 4096;

// What an algorithm's early data became: the sends of what did not ride in the check's messages,
// and what rode in each member's (ArgumentCheck::Early), for the algorithm to use after a passing
// verdict.
struct EarlyData {
  std::vector<CollectiveContext::Pending> rest_sends;
  std::vector<std::span<const uint8_t>> ridden;
};

// How the descriptors (each with its ride) reach every member. Every member of a call must use
// the same one.
enum class CheckExchange {
  // Each rank sends its own to every other: one message's latency, n-1 messages a rank.
  kDirect,
  // Bruck's all-gather: in step k each rank sends what it holds to the rank 2^k below and receives
  // from the rank 2^k above, ceil(log2 n) messages a rank, as many latencies. For ranks that share
  // CPUs, where each message costs the others CPU time more than its latency costs.
  kForwarded,
};

// Every rank's descriptor reaches every other (one exchange of small messages, direct or
// forwarded) and each rank compares them all, so every rank reaches the same verdict: OK, or
// InvalidArgument listing each field that differs with every rank's value. With identical
// descriptors this doubles as a barrier.
// The constructor posts the direct exchange (the forwarded one runs in Verdict, step by step),
// with this rank's early data (`early`, where `mine.early_bytes` is set): its ride in the
// descriptor's messages, the rest after them.
class ArgumentCheck {
 public:
  ArgumentCheck(CollectiveContext& ctx, const CallDescriptor& mine, const void* early = nullptr,
                CheckExchange exchange = CheckExchange::kDirect);
  // Waits for every member's descriptor and compares. `all`, if given, receives every rank's
  // descriptor (what is shared, not compared: Average's weights, who is stale, early bytes).
  absl::Status Verdict(std::vector<CallDescriptor>* all = nullptr);
  // After a passing verdict: what left of this rank's early data and what each member's descriptor
  // message carried of its own (by rank, this rank's too; empty where a member sent none).
  EarlyData Early() const;
  // After a verdict that the arguments differ: receives and drops the rest of what members sent
  // early, so that none of the call's data stays on the links (data is never used unchecked).
  absl::Status DiscardEarlyData();

 private:
  const uint8_t* slot(int rank) const { return all_ + kSlotBytes * rank; }
  // A descriptor message's length: the descriptor and the ride it announces.
  size_t SlotLength(const uint8_t* slot) const;
  // The direct exchange's messages, each checked against its descriptor.
  absl::Status AwaitDirect();
  // The forwarded exchange, every step; each message's descriptors parsed and checked.
  absl::Status ExchangeForwarded();

  static constexpr size_t kDescriptorBytes = 72;
  static constexpr size_t kSlotBytes = kDescriptorBytes + kMaxRideBytes;

  CollectiveContext& ctx_;
  const CallDescriptor mine_;
  const CheckExchange exchange_;
  uint8_t* all_;  // Every member's descriptor message (descriptor, then its ride), by rank.
  std::vector<CollectiveContext::Pending> sends_;       // The descriptor's messages.
  std::vector<CollectiveContext::Pending> rest_sends_;  // Early data beyond the ride.
  std::vector<CollectiveContext::Pending> receives_;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_ARG_CHECK_H_
