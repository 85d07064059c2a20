#ifndef HMC_DDP_PROCESS_GROUP_H_
#define HMC_DDP_PROCESS_GROUP_H_

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "collectives/communicator.h"
#include "ddp/traffic.h"

namespace hmc::ddp {

// A c10d process group over an hmc communicator, so any c10d user — libtorch's own
// c10d::Reducer included — runs on hmc. CPU tensors, one tensor per call (as with one device per
// process); every call is asynchronous and its Work's future completes when hmc's does. Failures
// surface as c10::Error with hmc's message (the peer and the cause). Calls use `call` (codecs,
// algorithm) as their per-call options; all-reduce of floating tensors may thus be lossy if a
// codec is set. send/recv ignore the tag: the n-th send to a peer matches its n-th receive (MPI's
// ordering). Libtorch 1.13's Reducer takes a ProcessGroup, not a Backend, hence the base.
class ProcessGroupHmc : public c10d::ProcessGroup {
 public:
  explicit ProcessGroupHmc(std::shared_ptr<Communicator> comm, CallOptions call = {});

  const std::string getBackendName() const override { return "hmc"; }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;

  Communicator& communicator() { return *comm_; }
  Traffic traffic() const { return meter_->totals(); }

 private:
  c10::intrusive_ptr<c10d::Work> Wrap(c10d::OpType type, std::shared_ptr<Work> work,
                                      std::vector<at::Tensor> outputs,
                                      std::function<void()> finish = nullptr);
  CallOptions CallWith(std::chrono::milliseconds timeout) const;

  std::shared_ptr<Communicator> comm_;
  const CallOptions call_;
  std::shared_ptr<TrafficMeter> meter_ = std::make_shared<TrafficMeter>();
};

}  // namespace hmc::ddp

#endif  // HMC_DDP_PROCESS_GROUP_H_
