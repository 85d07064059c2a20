#ifndef HMC_COLLECTIVES_AVERAGE_ROUND_H_
#define HMC_COLLECTIVES_AVERAGE_ROUND_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "collectives/averaging.h"
#include "collectives/communicator.h"
#include "collectives/communicator_impl.h"
#include "collectives/group.h"

namespace hmc {

// The round behind Communicator::BeginAverage and Average (communicator.h; the protocol is
// averaging.h's). Each attempt all-reduces every part's weighted copy in one epoch, the last part
// closing it with the vote; the caller's parts are written only once the round committed.
class AverageRoundImpl final : public AverageRound {
 public:
  // Made once this rank entered round `round` (CommunicatorImpl::EnterRound); `stale`: its parts
  // count for nothing (zeros, weight 0).
  AverageRoundImpl(CommunicatorImpl* comm, double weight, CallOptions call,
                   const SharedState* state, uint64_t round, bool stale);
  ~AverageRoundImpl() override;

  absl::Status Add(const Buffer& part, bool last) override;
  absl::StatusOr<AverageOutcome> Finish() override;

 private:
  struct Part {
    Buffer buffer;             // The caller's, written on commit.
    std::vector<uint8_t> sum;  // This rank's weighted copy, then the attempt's sum.
    AveragingAttempt attempt;  // What its call reads and, closing, writes.
    std::shared_ptr<Work> work;
  };

  // Starts the all-reduce of part `index` in the attempt's group.
  void Launch(size_t index);
  // Waits for every part of the attempt; the failure that ended it (a membership change over
  // any other), OK where the closing part committed.
  absl::Status AwaitAttempt();
  // Writes the committed averages into the caller's parts.
  absl::StatusOr<AverageOutcome> Commit(CommunicatorImpl::DecidedRound decided);
  void WaitForCalls();

  CommunicatorImpl* const comm_;
  const double weight_;
  const CallOptions call_;
  const SharedState* const state_;
  const bool stale_;
  std::shared_ptr<const Group> group_;  // Of the current attempt.
  std::deque<Part> parts_;              // Calls hold pointers to their part's attempt.
  bool closed_ = false;                 // The last part was added.
  bool finished_ = false;
  AverageOutcome outcome_;
};

}  // namespace hmc

#endif  // HMC_COLLECTIVES_AVERAGE_ROUND_H_
