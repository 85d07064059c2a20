#include "collectives/collective_context.h"

#include "absl/strings/str_format.h"

namespace hmc {

CollectiveContext::Pending CollectiveContext::Send(int peer, Phase phase, uint32_t step,
                                                   uint32_t segment, const void* data,
                                                   size_t bytes) {
  bytes_sent_ += bytes;
  Pending p{(*channels_)[peer]->Send(MakeTag(sequence_, phase, step, segment), data, bytes), peer};
  issued_.push_back(p.request);
  return p;
}

CollectiveContext::Pending CollectiveContext::Recv(int peer, Phase phase, uint32_t step,
                                                   uint32_t segment, void* data, size_t bytes) {
  bytes_received_ += bytes;
  Pending p{(*channels_)[peer]->Recv(MakeTag(sequence_, phase, step, segment), data, bytes), peer};
  issued_.push_back(p.request);
  return p;
}

absl::Status CollectiveContext::Wait(const Pending& pending) {
  absl::Status s = pending.request->Wait(deadline_);
  if (s.ok()) return s;
  const std::string& peer = (*channels_)[pending.peer]->peer_description();
  if (absl::IsDeadlineExceeded(s)) {
    return absl::DeadlineExceededError(
        absl::StrFormat("%s on rank %d: deadline exceeded waiting for %s", name_, rank_, peer));
  }
  return absl::Status(s.code(), absl::StrFormat("%s on rank %d: %s", name_, rank_, s.message()));
}

CollectiveContext::~CollectiveContext() {
  Drain();
  for (ScratchPool::Block& block : scratch_) pool_->Release(std::move(block));
}

uint8_t* CollectiveContext::Scratch(size_t bytes) {
  scratch_.push_back(pool_->Acquire(bytes));
  return scratch_.back().memory.get();
}

void CollectiveContext::Drain() {
  const absl::Time limit = absl::Now() + absl::Seconds(30);
  for (const RequestPtr& r : issued_) r->Wait(limit).IgnoreError();
  issued_.clear();
}

absl::Status CollectiveContext::WaitAll(const std::vector<Pending>& pending) {
  absl::Status first;
  for (const Pending& p : pending) {
    absl::Status s = Wait(p);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace hmc
