#ifndef HMC_TRANSPORTS_PER_LINK_TRANSPORT_H_
#define HMC_TRANSPORTS_PER_LINK_TRANSPORT_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/transport_choice.h"
#include "transports/transport.h"

namespace hmc {

// Links of two classes on several transports: TCP, and UCX or libfabric for the classes the
// choice gives them (core/transport_choice.h). The published address is TCP's followed, for each
// other transport, by its address ("ucx:…", "ofi:…") and the classes it serves
// ("ucx_links=intra|inter|all"); a link takes a transport other than TCP only where both of its
// ranks publish it for the link's class (the zones of its two ends say which), else TCP, so two
// ranks always agree.
class PerLinkTransport final : public Transport {
 public:
  // `others`: the transports besides TCP, by kind (null entries are ignored).
  PerLinkTransport(std::unique_ptr<Transport> tcp,
                   std::map<TransportKind, std::unique_ptr<Transport>> others,
                   TransportChoice choice, std::string zone);

  std::string address() const override { return address_; }
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> ConnectAll(
      int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) override;
  std::vector<std::shared_ptr<Channel>> ExpectPeers(const std::vector<PeerAddress>& peers) override;
  void SetFailureCallback(FailureCallback callback) override;
  absl::Status Shutdown(absl::Time deadline) override;

  // Which transport the link to `peer` takes, and the part of its address that transport reads.
  struct Route {
    TransportKind kind;
    PeerAddress address;
  };
  Route RouteTo(const PeerAddress& peer) const;

 private:
  TransportKind ChoiceFor(const std::string& zone) const;
  Transport& Of(TransportKind kind);

  std::map<TransportKind, std::unique_ptr<Transport>> transports_;  // TCP's too.
  const TransportChoice choice_;
  const std::string zone_;
  std::string address_;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_PER_LINK_TRANSPORT_H_
