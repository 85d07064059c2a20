#ifndef HMC_TRANSPORTS_UCX_UCX_CHANNEL_H_
#define HMC_TRANSPORTS_UCX_UCX_CHANNEL_H_

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "core/mutex.h"
#include "transports/peer_handshake.h"
#include "transports/proven_channel.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_wire.h"
#include "transports/ucx/ucx_worker.h"

namespace hmc {

// A link to one peer over a UCP endpoint. Channel methods post to the worker's progress thread;
// everything else here runs on that thread. Sends are active messages whose header holds the
// tag; UCX sends short messages eagerly and long ones by rendezvous, and a long one lands in the
// receive's own buffer (ucp_am_recv_data_nbx), so the only copies are of short messages.
// Messages that arrive before their receive wait: short ones copied, long ones as UCX's
// rendezvous descriptor, whose data stays at the sender until the receive is posted, so unexpected
// long messages hold no memory here.
class UcxChannel final : public ProvenChannel, public std::enable_shared_from_this<UcxChannel> {
 public:
  UcxChannel(UcxWorker* worker, int self_rank, const PeerAddress& peer, FailureNotice on_failure);
  ~UcxChannel() override;

  RequestPtr Send(uint64_t tag, const void* data, size_t bytes) override;
  RequestPtr Recv(uint64_t tag, void* data, size_t bytes) override;
  RequestPtr RecvUpTo(uint64_t tag, void* data, size_t capacity) override;
  void Close(const absl::Status& why) override;
  void DiscardTagsBelow(uint64_t floor, const absl::Status& why) override;

  // The rest runs on the progress thread.
  // Creates the endpoint to the peer's worker address; `local`: the peer shares this host.
  absl::Status Open(const std::string& worker_address, bool local);
  void SendControl(ControlMessage type, const std::vector<uint8_t>& payload);
  // An arrived data message (`data` a rendezvous descriptor where `rendezvous`); returns what the
  // active-message callback returns: UCS_INPROGRESS where the data is kept.
  ucs_status_t OnData(uint64_t tag, void* data, size_t length, bool rendezvous);
  // The handshake finished both ways: queued sends start.
  void OnReady();
  // Fails the channel, its pending and later requests with `why`; `tell_peer` sends the peer the
  // reason, `notify` reports the failure to the transport (not for a Close the caller asked for).
  void Fail(const absl::Status& why, bool tell_peer, bool notify);
  // The peer says it will send nothing more: receives nothing can satisfy fail.
  void OnGoodbye();
  // Starts closing the endpoint (flushing it, or at once where `force`); the returned request
  // completes when UCX is done with it.
  RequestPtr CloseEndpoint(bool force);
  bool failed() const { return failed_; }
  bool got_goodbye() const { return got_goodbye_; }
  // Data sends UCX has not completed (a rendezvous waits for the receiver to take its data).
  int sends_in_flight() const { return sends_in_flight_; }

 private:
  struct Posted {
    void* data;
    size_t capacity;
    bool up_to;
    RequestPtr request;
  };
  struct Arrival {
    size_t length = 0;
    std::vector<uint8_t> eager;  // A short message's copy.
    void* rendezvous = nullptr;  // Or a long one's descriptor.
  };
  struct InFlight;  // A UCX request of this channel's.

  RequestPtr PostReceive(uint64_t tag, void* data, size_t capacity, bool up_to);
  void StartSend(uint64_t tag, const void* data, size_t bytes, RequestPtr request);
  void Match(uint64_t tag, Posted posted, Arrival arrival);
  void Release(Arrival& arrival);
  void Finish(InFlight* op, ucs_status_t status, size_t length);
  static void OnSendDone(void* request, ucs_status_t status, void* user_data);
  static void OnReceiveDone(void* request, ucs_status_t status, size_t length, void* user_data);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

  UcxWorker* const worker_;

  // Progress thread only.
  ucp_ep_h ep_ = nullptr;
  bool failed_ = false;
  bool got_goodbye_ = false;
  bool ready_done_ = false;
  int sends_in_flight_ = 0;
  std::vector<std::function<void()>> before_ready_;  // Sends posted during the handshake.
  std::map<uint64_t, Posted> posted_;
  std::map<uint64_t, Arrival> arrived_;
  uint64_t floor_ = 0;
  absl::Status floor_why_;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_UCX_UCX_CHANNEL_H_
