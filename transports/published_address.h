#ifndef HMC_TRANSPORTS_PUBLISHED_ADDRESS_H_
#define HMC_TRANSPORTS_PUBLISHED_ADDRESS_H_

#include <optional>
#include <string>

namespace hmc {

// The address of a transport whose endpoints are opaque bytes (a UCX worker's address, a
// libfabric endpoint's name), as published through the coordinator: "KIND:HOST:HEX". HOST names
// this host's boot and network namespace, so that peers know which of them share memory and have
// no network between them (Channel::local).
std::string HostAndNamespace();
std::string PublishedAddress(const std::string& kind, const std::string& bytes);

struct ParsedAddress {
  std::string host;
  std::string bytes;
};
// Nullopt unless `text` is "KIND:HOST:HEX" with this kind and non-empty, even-length hex.
std::optional<ParsedAddress> ParsePublishedAddress(const std::string& kind,
                                                   const std::string& text);

}  // namespace hmc

#endif  // HMC_TRANSPORTS_PUBLISHED_ADDRESS_H_
