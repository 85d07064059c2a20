#ifndef HMC_TRANSPORTS_OFI_OFI_TRANSPORT_H_
#define HMC_TRANSPORTS_OFI_OFI_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transports/ofi/ofi_channel.h"
#include "transports/ofi/ofi_endpoint.h"
#include "transports/proven_links.h"
#include "transports/transport.h"

namespace hmc {

struct OfiTransportConfig {
  std::string token;
  bool insecure = false;  // Allow an empty token (RequireToken).
  std::string world_id = "hmc";
  uint32_t epoch = 1;
  OfiResources resources;
};

// Channels over libfabric: one reliable-datagram endpoint (FI_EP_RDM) per rank with tagged
// messages, on the provider the resources name (tcp;ofi_rxm by default: libfabric's TCP provider
// under its RDM utility layer; on EFA or verbs hardware, efa or verbs;ofi_rxm). Channels must not
// be used after their transport is destroyed.
//
// The address published through the coordinator is the endpoint's name ("ofi:HOST:HEX"); each
// rank inserts its peers' into its address vector, and each pair proves the token over untagged
// control messages (transports/peer_handshake.h) before data flows. Like UCX, libfabric links
// carry no seal or encryption: they are for links inside a zone.
class OfiTransport final : public Transport {
 public:
  static absl::StatusOr<std::unique_ptr<OfiTransport>> Create(const OfiTransportConfig& config);
  ~OfiTransport() override;

  std::string address() const override { return address_; }
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> ConnectAll(
      int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) override {
    return links_->ConnectAll(rank, peers, deadline);
  }
  std::vector<std::shared_ptr<Channel>> ExpectPeers(
      const std::vector<PeerAddress>& peers) override {
    return links_->ExpectPeers(peers);
  }
  void SetFailureCallback(FailureCallback callback) override {
    links_->SetFailureCallback(std::move(callback));
  }
  // Says goodbye on every channel and waits (until the deadline) for the peers' goodbyes.
  absl::Status Shutdown(absl::Time deadline) override;
  // "tcp;ofi_rxm on lo", and ", registered buffers" where operations register theirs.
  std::string Describe() const { return endpoint_->Describe(); }
  uint64_t registrations() const { return endpoint_->registrations(); }

 private:
  explicit OfiTransport(const OfiTransportConfig& config) : config_(config) {}
  // Keeps one untagged receive posted in `slot`: control messages land there.
  void ReceiveControl(size_t slot);

  const OfiTransportConfig config_;
  std::unique_ptr<OfiEndpoint> endpoint_;
  std::unique_ptr<ProvenLinks<OfiChannel>> links_;
  std::string host_;
  std::string address_;
  std::vector<std::vector<uint8_t>> control_buffers_;
  bool shut_down_ = false;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_OFI_OFI_TRANSPORT_H_
