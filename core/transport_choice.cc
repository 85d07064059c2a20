#include "core/transport_choice.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace hmc {
namespace {

absl::StatusOr<TransportKind> ParseKind(absl::string_view name, absl::string_view spec) {
  if (name == "tcp") return TransportKind::kTcp;
  if (name == "ucx") return TransportKind::kUcx;
  if (name == "ofi") return TransportKind::kOfi;
  return absl::InvalidArgumentError(absl::StrFormat(
      "transport=%s: '%s' is not a transport: auto, tcp, ucx, ofi, or per link class as "
      "intra=ucx,inter=tcp",
      spec, name));
}

}  // namespace

absl::string_view TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kUcx:
      return "ucx";
    case TransportKind::kOfi:
      return "ofi";
    case TransportKind::kTcp:
      break;
  }
  return "tcp";
}

absl::StatusOr<TransportChoice> ParseTransportChoice(absl::string_view spec) {
  TransportChoice choice;
  if (spec == "auto") {
    choice.automatic = true;
    return choice;
  }
  if (!absl::StrContains(spec, '=')) {
    absl::StatusOr<TransportKind> kind = ParseKind(spec, spec);
    if (!kind.ok()) return kind.status();
    choice.intra = choice.inter = *kind;
    return choice;
  }
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    absl::StatusOr<TransportKind> kind = ParseKind(kv.second, spec);
    if (!kind.ok()) return kind.status();
    if (kv.first == "intra") {
      choice.intra = *kind;
    } else if (kv.first == "inter") {
      choice.inter = *kind;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "transport=%s: '%s' is not a link class: intra (same zone) or inter", spec, kv.first));
    }
  }
  return choice;
}

}  // namespace hmc
