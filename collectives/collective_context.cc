#include "collectives/collective_context.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace hmc {

namespace {

int IndexOf(const std::vector<int>& members, int rank) {
  return static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
}

}  // namespace

CollectiveContext::CollectiveContext(CollectiveContext& parent, std::vector<int> members,
                                     uint32_t step_base)
    : pool_(parent.pool_),
      rank_(IndexOf(members, parent.rank_)),
      size_(static_cast<int>(members.size())),
      channels_(parent.channels_),
      sequence_(parent.sequence_),
      name_(parent.name_),
      deadline_(parent.deadline_),
      chunk_bytes_(parent.chunk_bytes_),
      pacing_(parent.pacing_),
      send_bytes_per_s_(parent.send_bytes_per_s_),
      parent_(&parent),
      members_(std::move(members)),
      step_base_(step_base) {}

CollectiveContext::Pending CollectiveContext::Send(int peer, Phase phase, uint32_t step,
                                                   uint32_t segment, const void* data, size_t bytes,
                                                   Delivery delivery) {
  if (parent_ != nullptr) {
    return parent_->Send(members_[peer], phase, step + step_base_, segment, data, bytes, delivery);
  }
  bytes_sent_ += bytes;
  if (bytes_sent_to_.empty()) bytes_sent_to_.assign(channels_->size(), 0);
  bytes_sent_to_[peer] += bytes;
  Channel& channel = *(*channels_)[peer];
  const uint64_t tag = MakeTag(sequence_, phase, step, segment);
  Pending p{delivery == Delivery::kEager ? channel.SendEager(tag, data, bytes)
                                         : channel.Send(tag, data, bytes),
            peer};
  issued_.push_back(p.request);
  return p;
}

CollectiveContext::Pending CollectiveContext::Recv(int peer, Phase phase, uint32_t step,
                                                   uint32_t segment, void* data, size_t bytes) {
  if (parent_ != nullptr) {
    return parent_->Recv(members_[peer], phase, step + step_base_, segment, data, bytes);
  }
  bytes_received_ += bytes;
  Pending p{(*channels_)[peer]->Recv(MakeTag(sequence_, phase, step, segment), data, bytes), peer};
  issued_.push_back(p.request);
  return p;
}

CollectiveContext::Pending CollectiveContext::RecvUpTo(int peer, Phase phase, uint32_t step,
                                                       uint32_t segment, void* data,
                                                       size_t capacity) {
  if (parent_ != nullptr) {
    return parent_->RecvUpTo(members_[peer], phase, step + step_base_, segment, data, capacity);
  }
  Pending p{(*channels_)[peer]->RecvUpTo(MakeTag(sequence_, phase, step, segment), data, capacity),
            peer, /*up_to=*/true};
  issued_.push_back(p.request);
  return p;
}

absl::Status CollectiveContext::Wait(const Pending& pending, size_t* received) {
  // `pending.peer` is a global rank.
  if (parent_ != nullptr) return parent_->Wait(pending, received);
  absl::Status s = pending.request->Wait(deadline_);
  if (s.ok()) {
    if (pending.up_to) bytes_received_ += pending.request->bytes();
    if (received != nullptr) *received = pending.request->bytes();
    return s;
  }
  const std::string& peer = (*channels_)[pending.peer]->peer_description();
  if (absl::IsDeadlineExceeded(s)) {
    return absl::DeadlineExceededError(
        absl::StrFormat("%s on rank %d: deadline exceeded waiting for %s", name_, rank_, peer));
  }
  return absl::Status(s.code(), absl::StrFormat("%s on rank %d: %s", name_, rank_, s.message()));
}

absl::Status CollectiveContext::PeerError(int peer, const absl::Status& cause) const {
  if (parent_ != nullptr) return parent_->PeerError(members_[peer], cause);
  return absl::Status(cause.code(),
                      absl::StrFormat("%s on rank %d: from %s: %s", name_, rank_,
                                      (*channels_)[peer]->peer_description(), cause.message()));
}

int CollectiveContext::GlobalRank(int member) const {
  return parent_ != nullptr ? parent_->GlobalRank(members_[member]) : member;
}

SendPacing CollectiveContext::PaceSends(const std::vector<uint64_t>& bytes_to) {
  std::vector<Channel*> channels;
  for (int p = 0; p < size_; ++p) {
    channels.push_back(p == rank_ ? nullptr : (*channels_)[GlobalRank(p)].get());
  }
  const std::vector<uint64_t> rates = PacingRates(send_bytes_per_s_, bytes_to);
  CountPacedLinks(static_cast<int>(
      std::count_if(rates.begin(), rates.end(), [](uint64_t rate) { return rate > 0; })));
  return SendPacing(channels, rates);
}

void CollectiveContext::CountPacedLinks(int links) {
  if (parent_ != nullptr) return parent_->CountPacedLinks(links);
  paced_links_ += links;
}

void CollectiveContext::EndPhase(const std::string& name) {
  if (parent_ != nullptr) return parent_->EndPhase(name);
  const absl::Time now = absl::Now();
  phases_.emplace_back(name, now - phase_start_);
  phase_start_ = now;
}

CollectiveContext::~CollectiveContext() {
  Drain();
  for (ScratchPool::Block& block : scratch_) pool_->Release(std::move(block));
}

uint8_t* CollectiveContext::Scratch(size_t bytes) {
  if (parent_ != nullptr) return parent_->Scratch(bytes);
  scratch_.push_back(pool_->Acquire(bytes));
  return scratch_.back().memory.get();
}

void CollectiveContext::Drain() {
  WaitForAll(issued_, absl::Now() + absl::Seconds(30));
  issued_.clear();
}

absl::Status CollectiveContext::WaitAll(const std::vector<Pending>& pending) {
  std::vector<RequestPtr> requests;
  requests.reserve(pending.size());
  for (const Pending& p : pending) requests.push_back(p.request);
  // One wake for all of them; what follows only collects the outcomes (and names a peer that
  // missed the deadline).
  WaitForAll(requests, deadline_);
  absl::Status first;
  for (const Pending& p : pending) {
    absl::Status s = Wait(p);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

std::vector<CollectiveContext::Pending> CollectiveContext::PostExchangeWithMembers(Phase phase,
                                                                                   uint32_t step,
                                                                                   uint8_t* all,
                                                                                   size_t bytes) {
  std::vector<Pending> pending = SendToMembers(phase, step, all + bytes * rank_, bytes);
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) pending.push_back(Recv(p, phase, step, 0, all + bytes * p, bytes));
  }
  return pending;
}

std::vector<CollectiveContext::Pending> CollectiveContext::SendToMembers(Phase phase, uint32_t step,
                                                                         const void* data,
                                                                         size_t bytes,
                                                                         Delivery delivery) {
  std::vector<Pending> pending;
  for (int step_from_me = 1; step_from_me < size_; ++step_from_me) {
    pending.push_back(Send((rank_ + step_from_me) % size_, phase, step, 0, data, bytes, delivery));
  }
  return pending;
}

absl::Status CollectiveContext::ExchangeWithMembers(Phase phase, uint32_t step, uint8_t* all,
                                                    size_t bytes) {
  return WaitAll(PostExchangeWithMembers(phase, step, all, bytes));
}

absl::Status CollectiveContext::AwaitMembers(uint32_t step) {
  uint8_t nothing = 0;  // Transports may touch the pointer even for no bytes.
  return ExchangeWithMembers(Phase::kReady, step, &nothing, 0);
}

}  // namespace hmc
