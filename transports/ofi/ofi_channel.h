#ifndef HMC_TRANSPORTS_OFI_OFI_CHANNEL_H_
#define HMC_TRANSPORTS_OFI_OFI_CHANNEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "core/mutex.h"
#include "transports/ofi/ofi_endpoint.h"
#include "transports/peer_handshake.h"
#include "transports/proven_channel.h"
#include "transports/transport.h"

namespace hmc {

// A link to one peer over a libfabric RDM endpoint. Channel methods post to the endpoint's
// progress thread; everything else here runs on it. Messages are tagged sends with hmc's 64-bit
// tag, received by receives directed at this peer's address (FI_DIRECTED_RECV), so the provider
// matches per link; messages that arrive before their receive wait in the provider (rxm's
// unexpected queue, and its rendezvous for long ones). Tags below a DiscardTagsBelow floor are
// drained by wildcard receives that cover [0, floor) in at most 64 tag/ignore blocks, each
// message truncated into a small scratch buffer (rxm never completes a zero-length receive that
// takes a long message), so that they neither match later receives nor stay queued; a failed
// link drains everything its peer still sends.
// rxm never completes a rendezvous send whose receiver died (the send waits for the receiver's
// read, and closing the connection does not flush it), so a failed link ends its sends' requests
// itself once the provider cannot reach the peer: where the provider reported the link broken, the
// goodbye (kLeave) that Close sends failed, or the provider refused the goodbye for
// kUnreachableAfter (rxm refuses a peer's operations while it reconnects, and a dead peer refuses
// the connection). A goodbye that went out while sends remain is sent again, a probe: one that
// rode a dead connection makes rxm reconnect. The provider keeps such a send until the endpoint
// closes; only a peer that came back on a new connection could still read it.
class OfiChannel final : public ProvenChannel, public std::enable_shared_from_this<OfiChannel> {
 public:
  OfiChannel(OfiEndpoint* endpoint, int self_rank, const PeerAddress& peer,
             FailureNotice on_failure);

  RequestPtr Send(uint64_t tag, const void* data, size_t bytes) override;
  RequestPtr Recv(uint64_t tag, void* data, size_t bytes) override;
  RequestPtr RecvUpTo(uint64_t tag, void* data, size_t capacity) override;
  void Close(const absl::Status& why) override;
  void DiscardTagsBelow(uint64_t floor, const absl::Status& why) override;

  // The rest runs on the progress thread (and is what OnControlMessage uses).
  void Open(fi_addr_t address, bool local);
  // `sent`, if given, gets the send's outcome (0 or an errno).
  void SendControl(ControlMessage type, const std::vector<uint8_t>& payload,
                   std::function<void(int error)> sent = nullptr);
  void OnReady();
  void Fail(const absl::Status& why, bool tell_peer, bool notify);
  void OnGoodbye();
  bool failed() const { return failed_; }
  bool got_goodbye() const { return got_goodbye_; }

 private:
  struct Receive {
    uint64_t tag;
    size_t capacity;
    bool up_to;
    RequestPtr request;
    absl::Status cancelled;  // Why it was cancelled, once it was.
  };

  RequestPtr PostReceive(uint64_t tag, void* data, size_t capacity, bool up_to);
  void StartReceive(uint64_t tag, void* data, size_t capacity, bool up_to, RequestPtr request);
  void StartSend(uint64_t tag, const void* data, size_t bytes, RequestPtr request);
  void OnReceived(const Receive& receive, int error, size_t length, size_t sent);
  // Sends the goodbye with `reason`; releases the sends if it fails (the peer is unreachable).
  void Leave(const std::string& reason);
  // While sends remain after Close: releases them once the provider has refused the goodbye for
  // kUnreachableAfter, or else sends it again once the last one went; `checks_left` bounds it.
  void WatchHeldSends(const std::string& reason, int checks_left);
  // Ends the requests of the sends the provider still holds with the link's error.
  void ReleaseSends();
  // Drains the peer's messages whose tags match `tag` under `ignore`, again after each one.
  void Drain(uint64_t tag, uint64_t ignore, uint64_t generation);
  void CancelReceivesBelow(uint64_t floor, const absl::Status& why);

  OfiEndpoint* const endpoint_;

  // Progress thread only.
  fi_addr_t address_ = FI_ADDR_UNSPEC;
  bool failed_ = false;
  bool got_goodbye_ = false;
  bool ready_done_ = false;
  bool leave_pending_ = false;  // A goodbye is posted and not yet done.
  std::vector<std::function<void()>> before_ready_;
  std::map<void*, Receive> receives_;  // Posted, by their op's context.
  std::map<void*, RequestPtr> sends_;  // Posted and not yet completed, by their op's context.
  std::set<void*> drains_;             // The drain receives posted now.
  uint64_t drain_generation_ = 0;      // Drains of an older generation are not posted again.
  // Where drained messages land, unread: the endpoint's eager limit, allocated with the first
  // drain (longer messages are truncated into it).
  std::vector<uint8_t> drain_scratch_;
  uint64_t floor_ = 0;
  absl::Status floor_why_;
};

// The header of an untagged control message: the sender's rank and the ControlMessage.
struct OfiControlHeader {
  int32_t from;
  uint8_t type;
  uint8_t reserved[3];
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_OFI_OFI_CHANNEL_H_
