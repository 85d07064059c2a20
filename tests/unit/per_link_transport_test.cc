// Which transport each link takes: UCX only where both of its ranks publish UCX for the link's
// class (same zone or not), so that the two ends always agree; TCP otherwise.
#include "transports/per_link_transport.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace hmc {
namespace {

// A transport that only has an address: routing reads nothing else.
class AddressOnly final : public Transport {
 public:
  explicit AddressOnly(std::string address) : address_(std::move(address)) {}
  std::string address() const override { return address_; }
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> ConnectAll(int,
                                                                   const std::vector<PeerAddress>&,
                                                                   absl::Time) override {
    return absl::UnimplementedError("routing only");
  }
  std::vector<std::shared_ptr<Channel>> ExpectPeers(const std::vector<PeerAddress>&) override {
    return {};
  }
  void SetFailureCallback(FailureCallback) override {}
  absl::Status Shutdown(absl::Time) override { return absl::OkStatus(); }

 private:
  std::string address_;
};

constexpr char kTcp[] = "10.0.0.2:4000 local:hmc-x";
constexpr char kUcx[] = "ucx:0011:abcdef";

PerLinkTransport Make(const std::string& spec, const std::string& zone = "a") {
  std::map<TransportKind, std::unique_ptr<Transport>> others;
  others[TransportKind::kUcx] = std::make_unique<AddressOnly>("ucx:0022:123456");
  others[TransportKind::kOfi] = std::make_unique<AddressOnly>("ofi:0022:abab");
  return PerLinkTransport(std::make_unique<AddressOnly>("10.0.0.1:4000"), std::move(others),
                          *ParseTransportChoice(spec), zone);
}

PeerAddress Peer(const std::string& zone, const std::string& links) {
  std::string address = kTcp;
  if (!links.empty()) absl::StrAppend(&address, " ", kUcx, " ucx_links=", links);
  return PeerAddress{1, address, "rank 1", zone};
}

TEST(PerLinkTransport, PublishesUcxForTheClassesItChooses) {
  EXPECT_EQ(Make("ucx").address(), "10.0.0.1:4000 ucx:0022:123456 ucx_links=all");
  EXPECT_EQ(Make("intra=ucx").address(), "10.0.0.1:4000 ucx:0022:123456 ucx_links=intra");
  EXPECT_EQ(Make("inter=ucx").address(), "10.0.0.1:4000 ucx:0022:123456 ucx_links=inter");
  EXPECT_EQ(Make("tcp").address(), "10.0.0.1:4000");
  EXPECT_EQ(Make("intra=ofi,inter=ucx").address(),
            "10.0.0.1:4000 ucx:0022:123456 ucx_links=inter ofi:0022:abab ofi_links=intra");
}

TEST(PerLinkTransport, ALinkTakesUcxOnlyWhereBothEndsChooseItForItsClass) {
  struct Case {
    std::string mine, peer_zone, peer_links;
    TransportKind expected;
  };
  for (const Case& c : std::vector<Case>{
           {"ucx", "a", "all", TransportKind::kUcx},
           {"ucx", "b", "all", TransportKind::kUcx},
           {"ucx", "a", "", TransportKind::kTcp},  // The peer publishes no UCX.
           {"ucx", "b", "intra", TransportKind::kTcp},
           {"intra=ucx", "a", "all", TransportKind::kUcx},
           {"intra=ucx", "b", "all", TransportKind::kTcp},
           {"intra=ucx", "a", "inter", TransportKind::kTcp},
           {"inter=ucx", "b", "inter", TransportKind::kUcx},
           {"tcp", "a", "all", TransportKind::kTcp},
           {"ofi", "a", "all", TransportKind::kTcp},  // The peer publishes UCX, not libfabric.
       }) {
    SCOPED_TRACE(c.mine + " to zone " + c.peer_zone + " publishing " + c.peer_links);
    const PerLinkTransport::Route route = Make(c.mine).RouteTo(Peer(c.peer_zone, c.peer_links));
    EXPECT_EQ(route.kind, c.expected);
    // The chosen transport reads only its own part of the address.
    EXPECT_EQ(route.address.address, c.expected == TransportKind::kUcx ? kUcx : kTcp);
    EXPECT_EQ(route.address.description, "rank 1");
  }
}

}  // namespace
}  // namespace hmc
