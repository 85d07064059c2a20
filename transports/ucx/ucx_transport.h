#ifndef HMC_TRANSPORTS_UCX_UCX_TRANSPORT_H_
#define HMC_TRANSPORTS_UCX_UCX_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transports/proven_links.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_channel.h"
#include "transports/ucx/ucx_worker.h"

namespace hmc {

struct UcxTransportConfig {
  std::string token;
  bool insecure = false;  // Allow an empty token (RequireToken).
  std::string world_id = "hmc";
  uint32_t epoch = 1;  // The membership epoch its channels belong to; peers must agree.
  UcxResources resources;
};

// Channels over UCX's UCP layer: RDMA, shared memory or TCP, whichever UCX finds between two
// workers. Channels must not be used after their transport is destroyed.
//
// Messages are UCP active messages that carry hmc's 64-bit tag in their header, matched by hmc
// per channel, rather than UCP's tag matching: a worker matches tags over all of its endpoints at
// once, so a UCP tag would have to hold the source rank beside hmc's tag, which already uses all
// 64 bits; per-channel matching also gives the contract's per-link failure, Close and
// DiscardTagsBelow directly. Long messages still move by UCX's rendezvous into the receive's own
// buffer.
//
// The address published through the coordinator is the worker's address ("ucx:HOST:HEX", HOST
// naming this host and network namespace). Each pair then proves the token both ways over its
// endpoints before data flows (transports/peer_handshake.h). UCX carries
// no seal or encryption: it is meant for links inside a zone (transport option), as TCP with TLS
// is for links between zones.
class UcxTransport final : public Transport {
 public:
  static absl::StatusOr<std::unique_ptr<UcxTransport>> Create(const UcxTransportConfig& config);
  ~UcxTransport() override;

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
  // Says goodbye on every channel, waits (until the deadline) for the peers' goodbyes, then
  // closes the endpoints: flushing what is in flight where the peer said goodbye and every send
  // completed, by force otherwise.
  absl::Status Shutdown(absl::Time deadline) override;

 private:
  explicit UcxTransport(const UcxTransportConfig& config) : config_(config) {}
  static ucs_status_t ControlArrived(void* arg, const void* header, size_t header_length,
                                     void* data, size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t DataArrived(void* arg, const void* header, size_t header_length, void* data,
                                  size_t length, const ucp_am_recv_param_t* param);

  const UcxTransportConfig config_;
  std::unique_ptr<UcxWorker> worker_;
  std::unique_ptr<ProvenLinks<UcxChannel>> links_;  // Destroyed before the worker.
  std::string host_;  // This host and network namespace, as addresses name it.
  std::string address_;
  bool shut_down_ = false;
  // Whether the message handlers pass messages to links_; read and cleared on the worker's
  // thread only, which runs the handlers, so that none reaches links_ once it is destroyed.
  bool delivering_ = true;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_UCX_UCX_TRANSPORT_H_
