#include "transports/per_link_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/log.h"

namespace hmc {
namespace {

constexpr char kUcxPrefix[] = "ucx:";
constexpr char kUcxLinksPrefix[] = "ucx_links=";

// A published address split into its transports' parts.
struct Parts {
  std::string tcp;
  std::string ucx;
  std::string ucx_links;  // intra, inter or all.
};

Parts Split(const std::string& address) {
  Parts parts;
  std::vector<std::string> tcp;
  for (absl::string_view token : absl::StrSplit(address, ' ', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&token, kUcxLinksPrefix)) {
      parts.ucx_links = std::string(token);
    } else if (absl::StartsWith(token, kUcxPrefix)) {
      parts.ucx = std::string(token);
    } else {
      tcp.emplace_back(token);
    }
  }
  parts.tcp = absl::StrJoin(tcp, " ");
  return parts;
}

}  // namespace

PerLinkTransport::PerLinkTransport(std::unique_ptr<Transport> tcp, std::unique_ptr<Transport> ucx,
                                   TransportChoice choice, std::string zone)
    : tcp_(std::move(tcp)), ucx_(std::move(ucx)), choice_(choice), zone_(std::move(zone)) {
  address_ = tcp_->address();
  const bool intra = choice_.intra == TransportKind::kUcx;
  const bool inter = choice_.inter == TransportKind::kUcx;
  if (ucx_ != nullptr && (intra || inter)) {
    absl::StrAppend(&address_, " ", ucx_->address(), " ", kUcxLinksPrefix,
                    intra && inter ? "all"
                    : intra        ? "intra"
                                   : "inter");
  }
}

bool PerLinkTransport::UcxFor(const std::string& zone) const {
  return (zone == zone_ ? choice_.intra : choice_.inter) == TransportKind::kUcx;
}

PerLinkTransport::Route PerLinkTransport::RouteTo(const PeerAddress& peer) const {
  const Parts parts = Split(peer.address);
  const bool same_zone = peer.zone == zone_;
  const bool peer_wants =
      parts.ucx_links == "all" || parts.ucx_links == (same_zone ? "intra" : "inter");
  const bool ucx = ucx_ != nullptr && UcxFor(peer.zone) && peer_wants && !parts.ucx.empty();
  Route route{ucx ? TransportKind::kUcx : TransportKind::kTcp, peer};
  route.address.address = ucx ? parts.ucx : parts.tcp;
  return route;
}

absl::StatusOr<std::vector<std::shared_ptr<Channel>>> PerLinkTransport::ConnectAll(
    int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) {
  std::vector<PeerAddress> by_kind[2];
  for (const PeerAddress& peer : peers) {
    if (peer.rank == rank) {  // Each transport wants this rank's own entry among its peers.
      const Parts parts = Split(peer.address);
      by_kind[static_cast<int>(TransportKind::kTcp)].push_back(peer);
      by_kind[static_cast<int>(TransportKind::kTcp)].back().address = parts.tcp;
      by_kind[static_cast<int>(TransportKind::kUcx)].push_back(peer);
      by_kind[static_cast<int>(TransportKind::kUcx)].back().address = parts.ucx;
      continue;
    }
    Route route = RouteTo(peer);
    if (ucx_ != nullptr && UcxFor(peer.zone) && route.kind == TransportKind::kTcp) {
      Logf("transport", "rank %d: %s takes TCP: it does not choose UCX for this class of link",
           rank, peer.description);
    }
    by_kind[static_cast<int>(route.kind)].push_back(std::move(route.address));
  }
  std::vector<std::shared_ptr<Channel>> channels;
  // TCP first, then UCX, on every rank: each waits only for handshakes its peers also run.
  for (TransportKind kind : {TransportKind::kTcp, TransportKind::kUcx}) {
    const std::vector<PeerAddress>& subset = by_kind[static_cast<int>(kind)];
    if (subset.size() <= 1) continue;  // No peer but this rank.

    Transport& transport = kind == TransportKind::kUcx ? *ucx_ : *tcp_;
    absl::StatusOr<std::vector<std::shared_ptr<Channel>>> some =
        transport.ConnectAll(rank, subset, deadline);
    if (!some.ok()) return some.status();
    channels.resize(std::max(channels.size(), some->size()));
    for (size_t r = 0; r < some->size(); ++r) {
      if ((*some)[r] != nullptr) channels[r] = (*some)[r];
    }
  }
  channels.resize(std::max<size_t>(channels.size(), rank + 1));
  return channels;
}

std::vector<std::shared_ptr<Channel>> PerLinkTransport::ExpectPeers(
    const std::vector<PeerAddress>& peers) {
  std::vector<std::shared_ptr<Channel>> channels;
  for (const PeerAddress& peer : peers) {
    Route route = RouteTo(peer);
    Transport& transport = route.kind == TransportKind::kUcx ? *ucx_ : *tcp_;
    channels.push_back(transport.ExpectPeers({route.address}).front());
  }
  return channels;
}

void PerLinkTransport::SetFailureCallback(FailureCallback callback) {
  if (ucx_ != nullptr) ucx_->SetFailureCallback(callback);
  tcp_->SetFailureCallback(std::move(callback));
}

void PerLinkTransport::Shutdown(absl::Time deadline) {
  if (ucx_ != nullptr) ucx_->Shutdown(deadline);
  tcp_->Shutdown(deadline);
}

}  // namespace hmc
