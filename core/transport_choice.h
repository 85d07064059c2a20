#ifndef HMC_CORE_TRANSPORT_CHOICE_H_
#define HMC_CORE_TRANSPORT_CHOICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hmc {

// Which transport carries each class of link (option `transport`): links to peers of this rank's
// zone (intra) and to other zones (inter).
enum class TransportKind { kTcp, kUcx, kOfi };

struct TransportChoice {
  TransportKind intra = TransportKind::kTcp;
  TransportKind inter = TransportKind::kTcp;
  // `auto`: intra is UCX where it was built and this host has an RDMA device, which TCP cannot
  // reach; links between zones stay TCP (TLS, many streams) unless forced.
  bool automatic = false;
};

// "auto", "tcp", "ucx", "ofi" (every link), or per class: "intra=ucx,inter=tcp" (a class not
// named is tcp).
absl::StatusOr<TransportChoice> ParseTransportChoice(absl::string_view spec);
absl::string_view TransportKindName(TransportKind kind);

}  // namespace hmc

#endif  // HMC_CORE_TRANSPORT_CHOICE_H_
