// The public Communicator: each method hands the call to its CommunicatorImpl.
#include "collectives/communicator.h"

#include <utility>

#include "collectives/communicator_impl.h"

namespace hmc {

Communicator::Communicator(std::unique_ptr<CommunicatorImpl> impl) : impl_(std::move(impl)) {}

Communicator::~Communicator() = default;

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(const Options& options) {
  absl::StatusOr<std::unique_ptr<CommunicatorImpl>> impl = CommunicatorImpl::Create(options);
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<Communicator>(new Communicator(std::move(*impl)));
}

std::unique_ptr<Communicator> Communicator::CreateFromChannels(
    int rank, std::vector<std::shared_ptr<Channel>> channels, const Options& options,
    const std::vector<std::string>& zones) {
  return std::unique_ptr<Communicator>(new Communicator(
      CommunicatorImpl::CreateFromChannels(rank, std::move(channels), options, zones)));
}

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }
int Communicator::id() const { return impl_->id(); }
bool Communicator::joined_running_group() const { return impl_->joined_running_group(); }
uint32_t Communicator::epoch() const { return impl_->epoch(); }
PeerTable Communicator::peers() const { return impl_->peers(); }
std::shared_ptr<const Group> Communicator::group() const { return impl_->group(); }

std::shared_ptr<Work> Communicator::AllReduce(const Buffer& in, const Buffer& out, ReduceOp op,
                                              const CallOptions& call) {
  return impl_->AllReduce(in, out, op, call);
}

std::shared_ptr<Work> Communicator::ReduceScatter(const Buffer& in, const Buffer& out, ReduceOp op,
                                                  const CallOptions& call) {
  return impl_->ReduceScatter(in, out, op, call);
}

std::shared_ptr<Work> Communicator::AllGather(const Buffer& in, const Buffer& out,
                                              const CallOptions& call) {
  return impl_->AllGather(in, out, call);
}

std::shared_ptr<Work> Communicator::Broadcast(const Buffer& in, const Buffer& out, int root,
                                              const CallOptions& call) {
  return impl_->Broadcast(in, out, root, call);
}

std::shared_ptr<Work> Communicator::Barrier(const CallOptions& call) {
  return impl_->Barrier(call);
}

absl::StatusOr<AverageOutcome> Communicator::Average(const Buffer& buffer, double weight,
                                                     const CallOptions& call,
                                                     const SharedState* state) {
  return impl_->Average(buffer, weight, call, state);
}

absl::StatusOr<std::unique_ptr<AverageRound>> Communicator::BeginAverage(double weight,
                                                                         const CallOptions& call,
                                                                         const SharedState* state) {
  return impl_->BeginAverage(weight, call, state);
}

bool Communicator::state_stale() const { return impl_->state_stale(); }
uint64_t Communicator::averaging_rounds() const { return impl_->averaging_rounds(); }

std::shared_ptr<Work> Communicator::Send(const Buffer& buffer, int peer) {
  return impl_->Send(buffer, peer);
}

std::shared_ptr<Work> Communicator::Recv(const Buffer& buffer, int peer) {
  return impl_->Recv(buffer, peer);
}

absl::Status Communicator::health() const { return impl_->health(); }
void Communicator::ApplyMembership(const PeerTable& table) { impl_->ApplyMembership(table); }
std::vector<LinkStats> Communicator::link_stats() const { return impl_->link_stats(); }
const StreamChoice& Communicator::stream_choice() const { return impl_->stream_choice(); }
const std::string& Communicator::placement() const { return impl_->placement(); }
LinkMatrix Communicator::links() const { return impl_->links(); }
absl::Status Communicator::ProbeLinks() { return impl_->ProbeLinks(); }

absl::Status Communicator::PutKey(const std::string& key, const std::string& value) {
  return impl_->PutKey(key, value);
}

std::vector<absl::StatusOr<std::string>> Communicator::GetKeys(const std::vector<std::string>& keys,
                                                               absl::Time deadline) {
  return impl_->GetKeys(keys, deadline);
}

absl::StatusOr<AllReducePlan> Communicator::PlanAllReduce(const Buffer& in,
                                                          const CallOptions& call) const {
  return impl_->PlanAllReduce(in, call);
}

}  // namespace hmc
