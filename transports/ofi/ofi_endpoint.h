#ifndef HMC_TRANSPORTS_OFI_OFI_ENDPOINT_H_
#define HMC_TRANSPORTS_OFI_OFI_ENDPOINT_H_

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transports/progress_thread.h"

namespace hmc {

// Which libfabric provider an endpoint uses, and the local address it binds to (its interface;
// rxm ignores a domain name in the hints). Empty source: the provider's first interface.
struct OfiResources {
  std::string provider = "tcp;ofi_rxm";
  std::string source;
};

// What ends an operation, on the progress thread: its context (as Start gave it), 0 or a positive
// errno, the length moved, and for a receive the length the sender sent (the remote CQ data
// hmc's sends carry; truncation errors report it unreliably otherwise).
using OfiDone = std::function<void(void* context, int error, size_t length, size_t sent)>;

// One operation in flight: libfabric hands its context back in the completion.
struct OfiOp {
  fi_context2 context;  // First: the provider's scratch (FI_CONTEXT2), and the op's identity.
  OfiDone done;
};

// A reliable-datagram endpoint (FI_EP_RDM) with tagged and untagged messages, its completion
// queue, address vector, and the progress thread that alone calls into them: it sleeps in
// fi_cq_sread, which fi_cq_signal wakes, so it does not spin.
class OfiEndpoint {
 public:
  static absl::StatusOr<std::unique_ptr<OfiEndpoint>> Create(const OfiResources& resources);
  // Stops the thread, closes the endpoint, and ends every operation still in flight with
  // ECANCELED.
  ~OfiEndpoint();
  OfiEndpoint(const OfiEndpoint&) = delete;
  OfiEndpoint& operator=(const OfiEndpoint&) = delete;

  fid_ep* ep() const { return ep_; }
  // The endpoint's name (opaque bytes) that peers insert into their address vectors.
  const std::string& name() const { return name_; }
  // "tcp;ofi_rxm on lo".
  std::string Describe() const;
  ProgressThread& thread() { return thread_; }

  // The rest runs on the progress thread.
  absl::StatusOr<fi_addr_t> Insert(const std::string& name);
  // Starts an operation with `peer` (FI_ADDR_UNSPEC: with any peer): `start` gets the op's
  // context and returns what the libfabric call returned; -FI_EAGAIN retries after progress. An
  // error ends the op with its errno. A peer's operations post in the order they are started
  // (one refused for now holds back that peer's later ones, and no other peer's: a peer whose
  // connection is dying, which rxm refuses until it gives up on it, must not stall the others).
  void Start(fi_addr_t peer, std::function<ssize_t(void* context)> start, OfiDone done);
  // Ends the operations with `peer` that are held back, with ECANCELED: for a failed link, whose
  // peer may never take them.
  void AbandonHeldBack(fi_addr_t peer);
  // How long the provider has refused every operation with `peer` for now (zero while none is
  // held back). rxm refuses a peer's operations while it has no connection to it and is making
  // one; it retries a refused connection every 2 s without end, so a dead peer's operations are
  // refused for as long as anyone asks.
  absl::Duration RefusedFor(fi_addr_t peer) const;
  // Asks the provider to cancel an op whose context Start gave (its done then gets ECANCELED).
  void Cancel(void* context);

 private:
  OfiEndpoint() = default;
  absl::Status Init(const OfiResources& resources);
  bool Progress();
  void Sleep(int max_ms);
  void Handle(const fi_cq_tagged_entry* entries, ssize_t n);
  void HandleError();
  void Finish(OfiOp* op, int error, size_t length, size_t sent);
  // Posts one operation; false, leaving `start` and `done` to the caller, where the provider
  // asked to try again later (FI_EAGAIN).
  bool TryStart(std::function<ssize_t(void* context)>& start, OfiDone& done);
  // Posts each peer's held-back operations, in order, until the provider refuses one again.
  void StartDeferred();

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  bool cq_waits_ = true;  // fi_cq_sread works; else the thread naps a millisecond.
  std::string name_;
  std::set<OfiOp*> live_;  // Progress thread only.
  struct Deferred {
    std::function<ssize_t(void* context)> start;
    OfiDone done;
  };
  struct HeldBack {
    std::deque<Deferred> ops;  // Oldest first.
    absl::Time since;          // When the provider last took one of them, or first refused them.
  };
  // Refused for now, by peer; progress thread only.
  std::map<fi_addr_t, HeldBack> deferred_;
  bool retry_due_ = false;  // A StartDeferred is posted.
  // How soon StartDeferred runs again: longer while the provider takes none of them.
  absl::Duration retry_after_;
  ProgressThread thread_;
};

absl::Status OfiError(ssize_t code, const std::string& what);

}  // namespace hmc

#endif  // HMC_TRANSPORTS_OFI_OFI_ENDPOINT_H_
