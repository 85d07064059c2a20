#ifndef HMC_PERF_WANEM_FORWARDER_H_
#define HMC_PERF_WANEM_FORWARDER_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "core/socket.h"
#include "perf/wanem/link_model.h"

namespace hmc::wanem {

// Addresses of emulated hosts: host i is 10.201.(i / 250).(i % 250 + 1), all in 10.201.0.0/16.
std::string HostAddress(int index);
// The host index of an IPv4 address in network byte order, or -1.
int HostIndexOf(uint32_t address_be);

// The flow of an IPv4 packet (at least 20 bytes): addresses, protocol and, for TCP and UDP, the
// ports (the 5-tuple), hashed.
uint64_t FlowOf(const uint8_t* packet, size_t length);

// Moves IPv4 packets between the TUN devices of emulated hosts, each packet released when the
// link model says (or dropped). One thread, epoll over the TUN descriptors, a heap of packets in
// flight ordered by release time, and microsecond timeouts (epoll_pwait2).
class Forwarder {
 public:
  Forwarder(LinkModel model, std::vector<UniqueFd> tuns);
  // Runs until `stop` becomes true; writes per-pair counters to `counters_path` every second
  // (when not empty), and applies the overrides in `control_path` whenever that file changes
  // (ApplyControl).
  absl::Status Run(const std::atomic<bool>& stop, const std::string& counters_path,
                   const std::string& control_path = "");

 private:
  struct InFlight {
    absl::Time release;
    uint64_t sequence;  // Ties keep arrival order.
    int to;
    std::vector<uint8_t> packet;
    bool operator>(const InFlight& other) const {
      return release != other.release ? release > other.release : sequence > other.sequence;
    }
  };

  void ReadFrom(int from);
  // Collects packets the model has decided on and writes those whose release time has come.
  void ReleaseDue(absl::Time now);
  void WriteCounters(const std::string& path) const;
  // The control file: a first line "generation N", then one line "FROM TO LOSS FLOW_BPS" (host
  // indexes) per overridden direction; every override not listed is lifted. Once applied, the
  // generation is written to PATH.applied, which hmc-wanem cut/heal/degrade wait for.
  void ApplyControl(const std::string& path);

  LinkModel model_;
  std::vector<UniqueFd> tuns_;
  struct Pending {
    int to;
    std::vector<uint8_t> packet;
  };
  std::unordered_map<uint64_t, Pending> in_model_;  // Packets inside the link model, by id.
  std::vector<LinkModel::Outcome> outcomes_;
  std::priority_queue<InFlight, std::vector<InFlight>, std::greater<InFlight>> in_flight_;
  uint64_t sequence_ = 0;
  uint64_t malformed_ = 0;  // Not IPv4, or to an address outside the topology.
};

}  // namespace hmc::wanem

#endif  // HMC_PERF_WANEM_FORWARDER_H_
