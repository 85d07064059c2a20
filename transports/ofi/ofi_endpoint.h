#ifndef HMC_TRANSPORTS_OFI_OFI_ENDPOINT_H_
#define HMC_TRANSPORTS_OFI_OFI_ENDPOINT_H_

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>

#include <atomic>
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
  // Register every operation's buffer with the domain, also where the provider does not require
  // it (FI_MR_LOCAL): what exercises the registration path on providers that work without it.
  bool register_always = false;
};

// The memory an operation sends from or receives into, and what the provider may do with it
// (FI_SEND or FI_RECV): registered for the operation's lifetime where that is needed.
struct OfiBuffer {
  const void* data = nullptr;
  size_t bytes = 0;
  uint64_t access = 0;
};

// A buffer's registration with a domain (fi_mr_reg), closed when destroyed.
class OfiRegistration {
 public:
  explicit OfiRegistration(fid_mr* mr) : mr_(mr) {}
  ~OfiRegistration() { fi_close(&mr_->fid); }
  OfiRegistration(const OfiRegistration&) = delete;
  OfiRegistration& operator=(const OfiRegistration&) = delete;
  // What the data-transfer calls take as the buffer's descriptor.
  void* descriptor() const { return fi_mr_desc(mr_); }

 private:
  fid_mr* const mr_;
};

// What starts an operation: gets the op's context and its buffer's descriptor (null where the
// buffer is not registered) and returns what the libfabric call returned.
using OfiStart = std::function<ssize_t(void* context, void* descriptor)>;

// What ends an operation, on the progress thread: its context (as Start gave it), 0 or a positive
// errno, the length moved, and for a receive the length the sender sent (the remote CQ data
// hmc's sends carry; truncation errors report it unreliably otherwise).
using OfiDone = std::function<void(void* context, int error, size_t length, size_t sent)>;

// One operation in flight: libfabric hands its context back in the completion.
struct OfiOp {
  fi_context2 context;  // First: the provider's scratch (FI_CONTEXT2), and the op's identity.
  OfiDone done;
  std::unique_ptr<OfiRegistration> memory;  // Until the provider is done with the buffer.
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
  // "tcp;ofi_rxm on lo", and ", registered buffers" where operations register theirs.
  std::string Describe() const;
  // Buffers registered so far (any thread).
  uint64_t registrations() const { return registrations_.load(std::memory_order_relaxed); }
  ProgressThread& thread() { return thread_; }
  // The longest message rxm may deliver straight into a posted receive (its eager limit). A
  // receive that may truncate a message must hold that much: rxm over tcp breaks the connection
  // where a receive truncates an eager message. Longer ones (rxm's rendezvous) truncate cleanly.
  size_t eager_limit() const { return eager_limit_; }

  // The rest runs on the progress thread.
  absl::StatusOr<fi_addr_t> Insert(const std::string& name);
  // Starts an operation with `peer` (FI_ADDR_UNSPEC: with any peer) on `buffer`, registered first
  // where the provider requires it (FI_MR_LOCAL, as verbs and EFA do) or the resources ask: `start`
  // returns what the libfabric call returned; -FI_EAGAIN retries after progress. An error, the
  // registration's too, ends the op with its errno. A peer's operations post in the order they are
  // started (one refused for now holds back that peer's later ones, and no other peer's: a peer
  // whose connection is dying, which rxm refuses until it gives up on it, must not stall the
  // others).
  void Start(fi_addr_t peer, const OfiBuffer& buffer, OfiStart start, OfiDone done);
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
  // Registers `buffer` with the domain into `memory` (left null where operations do not register
  // their buffers, the buffer is empty or the endpoint closed); 0 or the positive errno of the
  // failure.
  int Register(const OfiBuffer& buffer, std::unique_ptr<OfiRegistration>& memory);
  struct Deferred {
    OfiStart start;
    OfiDone done;
    std::unique_ptr<OfiRegistration> memory;
  };
  // Posts one operation; false, leaving it to the caller, where the provider asked to try again
  // later (FI_EAGAIN).
  bool TryStart(Deferred& op);
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
  bool register_memory_ = false;
  bool bind_memory_ = false;    // FI_MR_ENDPOINT: a registration is bound to the endpoint.
  bool provider_keys_ = false;  // FI_MR_PROV_KEY; else hmc picks keys unique in the domain.
  size_t eager_limit_ = 0;      // rxm's, from the environment it reads (RxmEagerLimit).
  uint64_t next_key_ = 1;       // Progress thread only.
  std::atomic<uint64_t> registrations_{0};
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
