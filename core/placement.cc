#include "core/placement.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include <climits>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/mutex.h"
#include "core/socket.h"

namespace hmc {
namespace {

// hwloc bitmaps freed with their owner.
class Cpus {
 public:
  Cpus() : bitmap_(hwloc_bitmap_alloc()) {}
  explicit Cpus(hwloc_bitmap_t owned) : bitmap_(owned) {}
  ~Cpus() { hwloc_bitmap_free(bitmap_); }
  Cpus(const Cpus&) = delete;
  Cpus& operator=(const Cpus&) = delete;
  hwloc_bitmap_t get() const { return bitmap_; }

  static std::string List(hwloc_const_bitmap_t bitmap) {
    char* text = nullptr;
    if (hwloc_bitmap_list_asprintf(&text, bitmap) < 0 || text == nullptr) return "";
    std::string list(text);
    std::free(text);
    return list;
  }
  std::string List() const { return List(bitmap_); }
  bool Parse(const std::string& list) {
    return hwloc_bitmap_list_sscanf(bitmap_, list.c_str()) == 0;
  }

 private:
  hwloc_bitmap_t bitmap_;
};

absl::StatusOr<hwloc_topology_t> LoadTopology(const std::string* synthetic) {
  // One load at a time in a process: hwloc's Linux backend reads devices through libudev, whose
  // first use initialises globals unguarded (TSan: two communicators created at once in one
  // process raced in its getrandom seeding).
  static Mutex* const loading = new Mutex();
  MutexLock lock(loading);
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) return absl::InternalError("hwloc: init failed");
  // I/O devices from sysfs, each under the CPUs it is local to; without hwloc's PCI component,
  // whose libpciaccess leaks at every load (LeakSanitizer: 1016 bytes) and which adds only the
  // bus tree between a device and those CPUs.
  const int configured =
      synthetic != nullptr
          ? hwloc_topology_set_synthetic(topology, synthetic->c_str())
          : (hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                           "pci") |
             hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT));
  if (configured != 0 || hwloc_topology_load(topology) != 0) {
    hwloc_topology_destroy(topology);
    return absl::InvalidArgumentError(absl::StrFormat(
        "hwloc: cannot load the topology%s",
        synthetic != nullptr ? absl::StrFormat(" '%s'", *synthetic) : std::string()));
  }
  return topology;
}

struct Installed {
  Mutex mu;
  std::shared_ptr<const Machine> machine ABSL_GUARDED_BY(mu);
  Placement placement ABSL_GUARDED_BY(mu);
};
Installed& Current() {
  static Installed* installed = new Installed();  // Never destroyed: threads may bind late.
  return *installed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Machine>> Machine::Load() {
  std::unique_ptr<Machine> machine(new Machine());
  absl::StatusOr<hwloc_topology_t> topology = LoadTopology(nullptr);
  if (!topology.ok()) return topology.status();
  machine->topology_ = *topology;
  return machine;
}

absl::StatusOr<std::unique_ptr<Machine>> Machine::Synthetic(const std::string& description) {
  std::unique_ptr<Machine> machine(new Machine());
  absl::StatusOr<hwloc_topology_t> topology = LoadTopology(&description);
  if (!topology.ok()) return topology.status();
  machine->topology_ = *topology;
  return machine;
}

Machine::~Machine() {
  if (topology_ != nullptr) hwloc_topology_destroy(topology_);
}

std::optional<std::string> Machine::NicLocality(const std::string& name) const {
  for (hwloc_obj_t device = hwloc_get_next_osdev(topology_, nullptr); device != nullptr;
       device = hwloc_get_next_osdev(topology_, device)) {
    if (device->name == nullptr || name != device->name) continue;
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topology_, device);
    if (near != nullptr && near->cpuset != nullptr) return Cpus::List(near->cpuset);
  }
  return std::nullopt;
}

std::string Machine::AllCpus() const {
  return Cpus::List(hwloc_topology_get_topology_cpuset(topology_));
}

std::string Placement::Describe() const {
  return absl::StrFormat("cpus %s; progress threads on %s (near %s%s)", cpus, progress_cpus,
                         nic.empty() ? "an unknown interface" : nic,
                         nic_cpus.empty() ? ", whose place hwloc does not know"
                                          : absl::StrFormat(", attached to cpus %s", nic_cpus));
}

absl::StatusOr<Placement> PlanPlacement(const Machine& machine, const PlacementRequest& request,
                                        const std::optional<std::string>& nic_cpus) {
  if (request.local_size < 1 || request.local_rank < 0 ||
      request.local_rank >= request.local_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("placement: local rank %d of %d", request.local_rank, request.local_size));
  }
  hwloc_topology_t topology = machine.topology();
  hwloc_obj_t root = hwloc_get_root_obj(topology);
  std::vector<hwloc_cpuset_t> shares(request.local_size, nullptr);
  if (hwloc_distrib(topology, &root, 1, shares.data(), request.local_size, INT_MAX, 0) != 0) {
    return absl::InternalError("placement: hwloc_distrib failed");
  }
  std::vector<std::unique_ptr<Cpus>> owned;
  for (hwloc_cpuset_t share : shares) owned.push_back(std::make_unique<Cpus>(share));
  const Cpus& mine = *owned[request.local_rank];

  Placement placement;
  placement.nic = request.nic;
  placement.cpus = mine.List();
  placement.progress_cpus = placement.cpus;
  if (nic_cpus.has_value()) {
    placement.nic_cpus = *nic_cpus;
    Cpus near;
    if (!near.Parse(*nic_cpus)) {
      return absl::InvalidArgumentError(absl::StrFormat("placement: cpu list '%s'", *nic_cpus));
    }
    Cpus both;
    hwloc_bitmap_and(both.get(), mine.get(), near.get());
    if (!hwloc_bitmap_iszero(both.get())) placement.progress_cpus = both.List();
  }
  return placement;
}

std::string InterfaceOf(const std::string& ip) {
  absl::StatusOr<SocketAddress> wanted = SocketAddress::Parse(
      ip.find(':') != std::string::npos ? absl::StrCat("[", ip, "]:0") : absl::StrCat(ip, ":0"));
  if (!wanted.ok()) return "";
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string name;
  for (ifaddrs* a = all; a != nullptr && name.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    absl::StatusOr<SocketAddress> address = SocketAddress::FromSockaddr(
        a->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    if (address.ok() && address->host() == wanted->host()) name = a->ifa_name;
  }
  freeifaddrs(all);
  return name;
}

absl::Status InstallPlacement(std::shared_ptr<const Machine> machine, const Placement& placement) {
  Cpus cpus;
  if (!cpus.Parse(placement.cpus) ||
      hwloc_set_cpubind(machine->topology(), cpus.get(), HWLOC_CPUBIND_PROCESS) != 0) {
    return absl::InternalError(
        absl::StrFormat("placement: cannot bind this process to cpus %s", placement.cpus));
  }
  Installed& current = Current();
  MutexLock lock(&current.mu);
  current.machine = std::move(machine);
  current.placement = placement;
  return absl::OkStatus();
}

void BindThisThread(ThreadRole role) {
  Installed& current = Current();
  std::shared_ptr<const Machine> machine;
  std::string list;
  {
    MutexLock lock(&current.mu);
    if (current.machine == nullptr) return;
    machine = current.machine;
    list = role == ThreadRole::kProgress ? current.placement.progress_cpus : current.placement.cpus;
  }
  Cpus cpus;
  if (!cpus.Parse(list) ||
      hwloc_set_cpubind(machine->topology(), cpus.get(), HWLOC_CPUBIND_THREAD) != 0) {
    Logf("placement", "cannot bind a thread to cpus %s; it runs unbound", list);
  }
}

std::string CurrentThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "";
  Cpus cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) hwloc_bitmap_set(cpus.get(), static_cast<unsigned>(cpu));
  }
  return cpus.List();
}

}  // namespace hmc
