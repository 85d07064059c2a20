#ifndef HMC_CORE_PLACEMENT_H_
#define HMC_CORE_PLACEMENT_H_

#include <hwloc.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace hmc {

// The machine as hwloc sees it: cores, caches, NUMA nodes, packages, and the network devices
// with the part of the machine each is attached to.
class Machine {
 public:
  // This machine, with its I/O devices.
  static absl::StatusOr<std::unique_ptr<Machine>> Load();
  // A described one (hwloc's synthetic syntax, e.g. "pack:2 numa:1 core:4 pu:1"), for tests.
  static absl::StatusOr<std::unique_ptr<Machine>> Synthetic(const std::string& description);
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  hwloc_topology_t topology() const { return topology_; }
  // The CPUs nearest the network interface `name` (e.g. "eth0", or an RDMA device such as
  // "mlx5_0"), as a list ("0-7"); nullopt where hwloc does not know where it is attached
  // (virtual devices, loopback).
  std::optional<std::string> NicLocality(const std::string& name) const;
  // Every CPU, as a list.
  std::string AllCpus() const;

 private:
  Machine() = default;
  hwloc_topology_t topology_ = nullptr;
};

// Where one rank's threads run. `cpus` is the rank's share of the machine: with several ranks on
// one machine (local_size, from hmcrun) each gets its own part, spread over packages and NUMA
// nodes as hwloc_distrib spreads them. `progress_cpus` are the part of it nearest the NIC that
// carries the rank's traffic, for the transports' progress threads; all of `cpus` where the NIC's
// place is unknown or lies outside the rank's share.
struct Placement {
  std::string nic;       // The interface, or empty when unknown.
  std::string nic_cpus;  // Where it is attached; empty when unknown.
  std::string cpus;      // CPU lists, as hwloc prints them ("0-3,8").
  std::string progress_cpus;
  std::string Describe() const;
};

struct PlacementRequest {
  int local_rank = 0;
  int local_size = 1;
  std::string nic;  // The interface that carries the traffic; empty: unknown.
};

absl::StatusOr<Placement> PlanPlacement(const Machine& machine, const PlacementRequest& request,
                                        const std::optional<std::string>& nic_cpus);

// The interface that owns `ip` (an address of this host), e.g. "eth0"; empty when none does.
std::string InterfaceOf(const std::string& ip);

// The roles of hmc's threads.
enum class ThreadRole { kProgress, kWorker };

// Binds this process to the placement's CPUs (threads started later inherit it) and records it
// for BindThisThread. Called once per process, before hmc starts its threads.
absl::Status InstallPlacement(std::shared_ptr<const Machine> machine, const Placement& placement);
// Binds the calling thread to where its role runs, if a placement was installed; a thread of
// hmc's calls it as it starts. Failures are logged, not fatal: a thread runs unbound.
void BindThisThread(ThreadRole role);
// The CPUs the calling thread may run on, as a list (what the binding did).
std::string CurrentThreadCpus();

}  // namespace hmc

#endif  // HMC_CORE_PLACEMENT_H_
