#ifndef HMC_TRANSPORTS_PER_LINK_TRANSPORT_H_
#define HMC_TRANSPORTS_PER_LINK_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "core/transport_choice.h"
#include "transports/transport.h"

namespace hmc {

// Links of two classes on two transports: TCP, and UCX for the classes the choice gives it
// (core/transport_choice.h). The published address is TCP's followed by " ucx:…" and
// " ucx_links=intra|inter|all"; a link takes UCX only where both of its ranks publish it for the
// link's class (the zones of its two ends say which), else TCP, so two ranks always agree.
class PerLinkTransport final : public Transport {
 public:
  // `ucx` may be null (not built, or chosen for no class).
  PerLinkTransport(std::unique_ptr<Transport> tcp, std::unique_ptr<Transport> ucx,
                   TransportChoice choice, std::string zone);

  std::string address() const override { return address_; }
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> ConnectAll(
      int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) override;
  std::vector<std::shared_ptr<Channel>> ExpectPeers(const std::vector<PeerAddress>& peers) override;
  void SetFailureCallback(FailureCallback callback) override;
  void Shutdown(absl::Time deadline) override;

  // Which transport the link to `peer` takes, and the part of its address that transport reads.
  struct Route {
    TransportKind kind;
    PeerAddress address;
  };
  Route RouteTo(const PeerAddress& peer) const;

 private:
  bool UcxFor(const std::string& zone) const;

  std::unique_ptr<Transport> tcp_;
  std::unique_ptr<Transport> ucx_;
  const TransportChoice choice_;
  const std::string zone_;
  std::string address_;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_PER_LINK_TRANSPORT_H_
