#ifndef HMC_TRANSPORTS_INPROC_INPROC_TRANSPORT_H_
#define HMC_TRANSPORTS_INPROC_INPROC_TRANSPORT_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/mutex.h"
#include "transports/transport.h"

namespace hmc {

// Threads of one process standing in for ranks, for unit tests of algorithms (and under TSan).
// Sends copy eagerly into the fabric, like a socket buffer, so they complete at once.
class InprocFabric {
 public:
  // Fails every link of `rank`, as a dead process would.
  void Kill(int rank, const absl::Status& why);

 private:
  friend class InprocChannel;
  using Key = std::tuple<int, int, uint64_t>;  // (from, to, tag)
  struct PostedRecv {
    void* data;
    size_t bytes;
    bool up_to;
    RequestPtr request;
  };

  Mutex mu_;
  std::map<Key, std::vector<uint8_t>> messages_ ABSL_GUARDED_BY(mu_);
  std::map<Key, PostedRecv> receives_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, int>, absl::Status> broken_ ABSL_GUARDED_BY(mu_);
  std::map<int, absl::Status> killed_ ABSL_GUARDED_BY(mu_);
  // What each (self, peer) channel moved.
  std::map<std::pair<int, int>, LinkStats> stats_ ABSL_GUARDED_BY(mu_);
  // DiscardTagsBelow of each (receiver, sender) link: the floor and why.
  std::map<std::pair<int, int>, std::pair<uint64_t, absl::Status>> floors_ ABSL_GUARDED_BY(mu_);
};

class InprocTransport final : public Transport {
 public:
  InprocTransport(std::shared_ptr<InprocFabric> fabric, int rank);
  std::string address() const override;
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> ConnectAll(
      int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) override;
  std::vector<std::shared_ptr<Channel>> ExpectPeers(const std::vector<PeerAddress>& peers) override;
  void SetFailureCallback(FailureCallback) override {}
  // Sends are copied eagerly: nothing is ever in flight.
  absl::Status Shutdown(absl::Time) override { return absl::OkStatus(); }

 private:
  std::shared_ptr<InprocFabric> fabric_;
  int rank_;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_INPROC_INPROC_TRANSPORT_H_
