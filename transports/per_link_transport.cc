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

constexpr TransportKind kOthers[] = {TransportKind::kUcx, TransportKind::kOfi};

// A published address split into its transports' parts.
struct Parts {
  std::string tcp;
  std::map<TransportKind, std::string> address;
  std::map<TransportKind, std::string> links;  // intra, inter or all.
};

Parts Split(const std::string& address) {
  Parts parts;
  std::vector<std::string> tcp;
  for (absl::string_view token : absl::StrSplit(address, ' ', absl::SkipEmpty())) {
    bool other = false;
    for (TransportKind kind : kOthers) {
      const std::string name(TransportKindName(kind));
      absl::string_view rest = token;
      if (absl::ConsumePrefix(&rest, absl::StrCat(name, "_links="))) {
        parts.links[kind] = std::string(rest);
        other = true;
      } else if (absl::StartsWith(token, absl::StrCat(name, ":"))) {
        parts.address[kind] = std::string(token);
        other = true;
      }
    }
    if (!other) tcp.emplace_back(token);
  }
  parts.tcp = absl::StrJoin(tcp, " ");
  return parts;
}

}  // namespace

PerLinkTransport::PerLinkTransport(std::unique_ptr<Transport> tcp,
                                   std::map<TransportKind, std::unique_ptr<Transport>> others,
                                   TransportChoice choice, std::string zone)
    : choice_(choice), zone_(std::move(zone)) {
  address_ = tcp->address();
  transports_[TransportKind::kTcp] = std::move(tcp);
  for (auto& [kind, transport] : others) {
    if (transport == nullptr || kind == TransportKind::kTcp) continue;
    const bool intra = choice_.intra == kind;
    const bool inter = choice_.inter == kind;
    if (intra || inter) {
      absl::StrAppend(&address_, " ", transport->address(), " ", TransportKindName(kind), "_links=",
                      intra && inter ? "all"
                      : intra        ? "intra"
                                     : "inter");
    }
    transports_[kind] = std::move(transport);
  }
}

TransportKind PerLinkTransport::ChoiceFor(const std::string& zone) const {
  return zone == zone_ ? choice_.intra : choice_.inter;
}

Transport& PerLinkTransport::Of(TransportKind kind) { return *transports_.at(kind); }

PerLinkTransport::Route PerLinkTransport::RouteTo(const PeerAddress& peer) const {
  const Parts parts = Split(peer.address);
  const TransportKind wanted = ChoiceFor(peer.zone);
  const std::string link_class = peer.zone == zone_ ? "intra" : "inter";
  auto links = parts.links.find(wanted);
  const bool peer_wants =
      links != parts.links.end() && (links->second == "all" || links->second == link_class);
  const bool other = wanted != TransportKind::kTcp && transports_.contains(wanted) && peer_wants &&
                     parts.address.contains(wanted);
  Route route{other ? wanted : TransportKind::kTcp, peer};
  route.address.address = other ? parts.address.at(wanted) : parts.tcp;
  return route;
}

absl::StatusOr<std::vector<std::shared_ptr<Channel>>> PerLinkTransport::ConnectAll(
    int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) {
  std::map<TransportKind, std::vector<PeerAddress>> by_kind;
  for (const PeerAddress& peer : peers) {
    if (peer.rank == rank) {  // Each transport wants this rank's own entry among its peers.
      const Parts parts = Split(peer.address);
      for (const auto& [kind, transport] : transports_) {
        PeerAddress self = peer;
        self.address = kind == TransportKind::kTcp    ? parts.tcp
                       : parts.address.contains(kind) ? parts.address.at(kind)
                                                      : "";
        by_kind[kind].push_back(self);
      }
      continue;
    }
    Route route = RouteTo(peer);
    if (route.kind != ChoiceFor(peer.zone)) {
      Logf("transport", "rank %d: %s takes TCP: it does not choose %s for this class of link", rank,
           peer.description, TransportKindName(ChoiceFor(peer.zone)));
    }
    by_kind[route.kind].push_back(std::move(route.address));
  }
  std::vector<std::shared_ptr<Channel>> channels;
  // In one order on every rank (TCP, UCX, libfabric): each waits only for handshakes its peers
  // also run.
  for (auto& [kind, subset] : by_kind) {
    if (subset.size() <= 1) continue;  // No peer but this rank.
    absl::StatusOr<std::vector<std::shared_ptr<Channel>>> some =
        Of(kind).ConnectAll(rank, subset, deadline);
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
    channels.push_back(Of(route.kind).ExpectPeers({route.address}).front());
  }
  return channels;
}

void PerLinkTransport::SetFailureCallback(FailureCallback callback) {
  for (auto& [kind, transport] : transports_) transport->SetFailureCallback(callback);
}

absl::Status PerLinkTransport::Shutdown(absl::Time deadline) {
  // In reverse of the connecting order; every rank alike. The first error, once all are shut.
  absl::Status first;
  for (auto it = transports_.rbegin(); it != transports_.rend(); ++it) {
    first.Update(it->second->Shutdown(deadline));
  }
  return first;
}

}  // namespace hmc
