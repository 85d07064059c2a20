#include "ddp/hmc_reducer.h"

#include <c10/util/Exception.h>

#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "ddp/gradient_averager.h"
#include "ddp/process_group.h"

namespace hmc::ddp {

HmcReducer MakeReducer(std::shared_ptr<Communicator> comm, std::vector<at::Tensor> parameters,
                       size_t bucket_bytes, AveragingOptions averaging, bool fault_tolerant) {
  const bool joined = comm->joined_running_group();
  TORCH_CHECK(!joined || fault_tolerant,
              "hmc reducer: this rank joined a running group, which only the fault-tolerant hook "
              "can take");
  if (!joined) BroadcastFromRankZero(*comm, parameters);  // A joiner downloads them.
  const std::vector<bool> dense(parameters.size(), false);
  auto [buckets, limits] =
      c10d::compute_bucket_assignment_by_size(parameters, {bucket_bytes}, dense);
  HmcReducer made;
  made.buckets = buckets.size();
  made.reducer = std::make_shared<c10d::Reducer>(
      parameters, buckets, limits, c10::make_intrusive<ProcessGroupHmc>(comm), dense, bucket_bytes,
      /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
      std::unordered_map<size_t, std::string>{}, bucket_bytes);
  if (fault_tolerant) {
    auto hook = std::make_unique<FaultTolerantCommHook>(comm, parameters, std::move(averaging));
    made.fault_tolerant_hook = hook.get();
    made.reducer->register_comm_hook(std::move(hook));
  } else {
    auto hook = std::make_unique<AveragingCommHook>(comm, std::move(averaging));
    made.hook = hook.get();
    made.reducer->register_comm_hook(std::move(hook));
  }
  return made;
}

}  // namespace hmc::ddp
