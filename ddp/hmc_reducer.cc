#include "ddp/hmc_reducer.h"

#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "ddp/gradient_averager.h"
#include "ddp/process_group.h"

namespace hmc::ddp {

HmcReducer MakeReducer(std::shared_ptr<Communicator> comm, std::vector<at::Tensor> parameters,
                       size_t bucket_bytes, AveragingOptions averaging) {
  BroadcastFromRankZero(*comm, parameters);
  const std::vector<bool> dense(parameters.size(), false);
  auto [buckets, limits] =
      c10d::compute_bucket_assignment_by_size(parameters, {bucket_bytes}, dense);
  HmcReducer made;
  made.buckets = buckets.size();
  made.reducer = std::make_shared<c10d::Reducer>(
      parameters, buckets, limits, c10::make_intrusive<ProcessGroupHmc>(comm), dense, bucket_bytes,
      /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
      std::unordered_map<size_t, std::string>{}, bucket_bytes);
  auto hook = std::make_unique<AveragingCommHook>(comm, std::move(averaging));
  made.hook = hook.get();
  made.reducer->register_comm_hook(std::move(hook));
  return made;
}

}  // namespace hmc::ddp
