#ifndef HMC_TRANSPORTS_PROVEN_CHANNEL_H_
#define HMC_TRANSPORTS_PROVEN_CHANNEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/mutex.h"
#include "transports/transport.h"

namespace hmc {

// What the channels of UCX and libfabric share: the peer's identity, the link's status and
// counters, and the handshake's state (peer_handshake.h, proven_links.h).
class ProvenChannel : public Channel {
 public:
  using FailureNotice = std::function<void(int rank, const absl::Status& why)>;

  ProvenChannel(int self_rank, const PeerAddress& peer, FailureNotice on_failure)
      : self_rank_(self_rank),
        peer_rank_(peer.rank),
        description_(peer.description.empty() ? absl::StrFormat("rank %d", peer.rank)
                                              : peer.description),
        on_failure_(std::move(on_failure)) {}

  int peer_rank() const override { return peer_rank_; }
  const std::string& peer_description() const override { return description_; }
  absl::Status status() const override {
    MutexLock lock(&mu_);
    return status_;
  }
  LinkStats stats() const override { return counters_.Read(); }
  bool local() const override { return local_; }
  // Completes when the handshake finished both ways (or fails with why it did not).
  const RequestPtr& ready() const { return ready_; }
  absl::Status Error(const std::string& what) const {
    return absl::UnavailableError(absl::StrFormat("%s: %s", description_, what));
  }

  // The handshake's state.
  std::string nonce;           // Ours, for the peer's proof.
  bool hello_sent = false;     // Our proof, answering the peer's challenge.
  bool peer_proven = false;    // The peer's hello checked out (we sent Accept).
  bool peer_accepted = false;  // The peer accepted our hello.
  bool goodbye_sent = false;   // Nothing is sent after it.

 protected:
  void SetStatus(const absl::Status& why) {
    MutexLock lock(&mu_);
    status_ = why;
  }
  void CountSent(uint64_t bytes) { counters_.AddSent(bytes, 1); }
  void CountReceived(uint64_t bytes) { counters_.AddReceived(bytes, 1); }

  const int self_rank_;
  const int peer_rank_;
  const std::string description_;
  const FailureNotice on_failure_;
  const RequestPtr ready_ = std::make_shared<Request>();
  bool local_ = false;

 private:
  mutable Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  LinkCounters counters_;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_PROVEN_CHANNEL_H_
