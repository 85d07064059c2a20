#include "ddp/optimizer_state.h"

#include <c10/util/Exception.h>
#include <c10/util/string_utils.h>

#include <memory>

namespace hmc::ddp {
namespace {

// The key libtorch's optimizers file a parameter's state under.
std::string StateKey(const at::Tensor& parameter) {
  return c10::guts::to_string(parameter.unsafeGetTensorImpl());
}

// Creates `State` for every parameter that has none (`make` fills it) and returns the state.
// Every parameter of every group, in order.
std::vector<at::Tensor> Parameters(torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> all;
  for (auto& group : optimizer.param_groups()) {
    for (const at::Tensor& p : group.params()) all.push_back(p);
  }
  return all;
}

template <typename State, typename Make>
std::vector<State*> Materialize(torch::optim::Optimizer& optimizer, Make make) {
  std::vector<State*> states;
  for (const at::Tensor& p : Parameters(optimizer)) {
    auto& slot = optimizer.state()[StateKey(p)];
    if (slot == nullptr) slot = make(p);
    states.push_back(static_cast<State*>(slot.get()));
  }
  return states;
}

template <typename State>
std::unique_ptr<State> AdamState(const at::Tensor& p, bool amsgrad) {
  auto state = std::make_unique<State>();
  state->step(0);
  state->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
  state->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
  if (amsgrad) state->max_exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
  return state;
}

template <typename State>
void NameAdamState(const std::vector<State*>& states, const std::string& kind,
                   std::vector<std::pair<std::string, at::Tensor>>& named) {
  for (size_t i = 0; i < states.size(); ++i) {
    const std::string index = std::to_string(i);
    named.emplace_back("optimizer." + kind + ".exp_avg." + index, states[i]->exp_avg());
    named.emplace_back("optimizer." + kind + ".exp_avg_sq." + index, states[i]->exp_avg_sq());
    if (states[i]->max_exp_avg_sq().defined()) {
      named.emplace_back("optimizer." + kind + ".max_exp_avg_sq." + index,
                         states[i]->max_exp_avg_sq());
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> MaterializeOptimizerState(
    torch::optim::Optimizer& optimizer) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  if (auto* adam = dynamic_cast<torch::optim::Adam*>(&optimizer)) {
    const bool amsgrad = static_cast<torch::optim::AdamOptions&>(adam->defaults()).amsgrad();
    NameAdamState(Materialize<torch::optim::AdamParamState>(
                      optimizer,
                      [&](const at::Tensor& p) {
                        return AdamState<torch::optim::AdamParamState>(p, amsgrad);
                      }),
                  "adam", named);
  } else if (auto* adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer)) {
    const bool amsgrad = static_cast<torch::optim::AdamWOptions&>(adamw->defaults()).amsgrad();
    NameAdamState(Materialize<torch::optim::AdamWParamState>(
                      optimizer,
                      [&](const at::Tensor& p) {
                        return AdamState<torch::optim::AdamWParamState>(p, amsgrad);
                      }),
                  "adamw", named);
  } else if (auto* sgd = dynamic_cast<torch::optim::SGD*>(&optimizer)) {
    const auto& options = static_cast<torch::optim::SGDOptions&>(sgd->defaults());
    if (options.momentum() == 0) return named;  // Plain SGD keeps no state.
    // A zero buffer gives the first step SGD's own (buffer = gradient) without dampening.
    TORCH_CHECK(options.dampening() == 0,
                "hmc: SGD with dampening starts its momentum differently; not supported");
    std::vector<torch::optim::SGDParamState*> states =
        Materialize<torch::optim::SGDParamState>(optimizer, [](const at::Tensor& p) {
          auto state = std::make_unique<torch::optim::SGDParamState>();
          state->momentum_buffer(torch::zeros_like(p, at::MemoryFormat::Preserve));
          return state;
        });
    for (size_t i = 0; i < states.size(); ++i) {
      named.emplace_back("optimizer.sgd.momentum." + std::to_string(i),
                         states[i]->momentum_buffer());
    }
  } else {
    TORCH_CHECK(false, "hmc: cannot share the state of this optimizer (Adam, AdamW, SGD can)");
  }
  return named;
}

void SetOptimizerSteps(torch::optim::Optimizer& optimizer, int64_t steps) {
  for (const at::Tensor& p : Parameters(optimizer)) {
    auto found = optimizer.state().find(StateKey(p));
    if (found == optimizer.state().end()) continue;
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(found->second.get())) {
      adam->step(steps);
    } else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(found->second.get())) {
      adamw->step(steps);
    }
  }
}

}  // namespace hmc::ddp
