#ifndef HMC_TRANSPORTS_TRANSPORT_FACTORY_H_
#define HMC_TRANSPORTS_TRANSPORT_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/options.h"
#include "transports/transport.h"
#include "transports/transport_options.h"

namespace hmc {

// What a transport needs besides the options, known only once the rank reached its coordinator.
struct TransportSite {
  // Where to listen when options.bind_addr is empty: the interface that reaches the coordinator,
  // any port.
  std::string default_bind;
  uint32_t epoch = 1;     // The membership epoch its first channels belong to.
  int ranks_on_host = 1;  // What the launcher placed on this machine (local_size), this one too.
};

// What a transport is made from: the core's options (bootstrap, TLS, liveness) and the
// transports' own.
struct TransportSettings : CoreOptions, TransportOptions {
  TransportSettings(const CoreOptions& core, const TransportOptions& transport)
      : CoreOptions(core), TransportOptions(transport) {}
};

// The transport the options describe, listening and ready for ConnectAll. The collectives see
// only the Transport and Channel interfaces; what is particular to one transport (TCP's streams,
// TLS, frame seals, socket tuning) is read from the options here.
absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const TransportSettings& options,
                                                         const TransportSite& site);

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TRANSPORT_FACTORY_H_
