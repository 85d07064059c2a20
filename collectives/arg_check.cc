#include "collectives/arg_check.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "collectives/allreduce_algorithms.h"

namespace hmc {
namespace {

void Encode(const CallDescriptor& d, uint8_t* out) {
  out[0] = static_cast<uint8_t>(d.kind);
  out[1] = static_cast<uint8_t>(d.dtype);
  out[2] = static_cast<uint8_t>(d.op);
  out[3] = d.algorithm;
  std::memcpy(out + 4, &d.root, 4);
  std::memcpy(out + 8, &d.count, 8);
  std::memset(out + 16, 0, 8);
  out[16] = d.locally_invalid ? 1 : 0;
  out[17] = d.stale ? 1 : 0;
  out[18] = static_cast<uint8_t>(d.early_phase);
  out[19] = d.closes_round ? 1 : 0;
  std::memcpy(out + 20, &d.plan, 4);
  std::memcpy(out + 24, &d.round, 8);
  std::memcpy(out + 32, &d.weight, 8);
  std::memcpy(out + 40, &d.state, 8);
  std::memcpy(out + 48, &d.early_bytes, 8);
  std::memcpy(out + 56, &d.early_to, 4);
  std::memcpy(out + 60, &d.part, 4);
  std::memcpy(out + 64, &d.early_segment_bytes, 8);
}

// Of the fields a rank shares: the weight, staleness and early data; the compared fields are the
// caller's own wherever the check passes.
CallDescriptor DecodeShared(const CallDescriptor& mine, const uint8_t* in) {
  CallDescriptor d = mine;
  d.stale = in[17] != 0;
  std::memcpy(&d.weight, in + 32, 8);
  std::memcpy(&d.early_bytes, in + 48, 8);
  d.early_phase = static_cast<Phase>(in[18]);
  std::memcpy(&d.early_to, in + 56, 4);
  std::memcpy(&d.early_segment_bytes, in + 64, 8);
  return d;
}

// Names each field and how to print a raw value of it.
struct Field {
  const char* name;
  std::string (*format)(const uint8_t* raw);
};

const Field kFields[] = {
    {"collective",
     [](const uint8_t* raw) -> std::string {
       return CollectiveName(static_cast<CollectiveKind>(raw[0]));
     }},
    {"dtype",
     [](const uint8_t* raw) -> std::string {
       return IsValidDType(raw[1]) ? std::string(DTypeName(static_cast<DType>(raw[1])))
                                   : absl::StrCat("invalid(", raw[1], ")");
     }},
    {"op",
     [](const uint8_t* raw) -> std::string {
       return IsValidReduceOp(raw[2]) ? std::string(ReduceOpName(static_cast<ReduceOp>(raw[2])))
                                      : absl::StrCat("invalid(", raw[2], ")");
     }},
    {"algorithm",
     [](const uint8_t* raw) -> std::string {
       const AllReduceAlgorithm* a = FindAllReduceAlgorithm(raw[3]);
       return a != nullptr ? std::string(a->name) : absl::StrCat("invalid(", raw[3], ")");
     }},
    {"root",
     [](const uint8_t* raw) -> std::string {
       int32_t root;
       std::memcpy(&root, raw + 4, 4);
       return absl::StrCat(root);
     }},
    {"count",
     [](const uint8_t* raw) -> std::string {
       uint64_t count;
       std::memcpy(&count, raw + 8, 8);
       return absl::StrCat(count);
     }},
    {"buffers", [](const uint8_t* raw) -> std::string { return raw[16] != 0 ? "invalid" : "ok"; }},
    {"plan (codecs and shares)",
     [](const uint8_t* raw) -> std::string {
       uint32_t plan;
       std::memcpy(&plan, raw + 20, 4);
       return absl::StrFormat("%08x", plan);
     }},
    {"averaging round",
     [](const uint8_t* raw) -> std::string {
       uint64_t round;
       std::memcpy(&round, raw + 24, 8);
       return absl::StrCat(round);
     }},
    {"shared state (names, types and sizes)",
     [](const uint8_t* raw) -> std::string {
       uint64_t state;
       std::memcpy(&state, raw + 40, 8);
       return state == 0 ? std::string("none") : absl::StrFormat("%016x", state);
     }},
    {"part of the averaging round",
     [](const uint8_t* raw) -> std::string {
       uint32_t part;
       std::memcpy(&part, raw + 60, 4);
       return absl::StrCat(part);
     }},
    {"last part of the averaging round",
     [](const uint8_t* raw) -> std::string { return raw[19] != 0 ? "yes" : "no"; }},
};

}  // namespace

uint64_t CallDescriptor::Ride() const { return early_to < 0 ? RideBytes(early_bytes) : 0; }

std::vector<uint64_t> CallDescriptor::RestMessagesTo(int member) const {
  const uint64_t rest = early_bytes - Ride();
  if (rest == 0 || (early_to >= 0 && early_to != member)) return {};
  const uint64_t segment = early_to < 0 || early_segment_bytes == 0 ? rest : early_segment_bytes;
  std::vector<uint64_t> lengths;
  for (uint64_t at = 0; at < rest; at += segment) lengths.push_back(std::min(segment, rest - at));
  return lengths;
}

const char* CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "allreduce";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllGather:
      return "allgather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kBarrier:
      return "barrier";
    case CollectiveKind::kAverage:
      return "average";
  }
  return "unknown";
}

ArgumentCheck::ArgumentCheck(CollectiveContext& ctx, const CallDescriptor& mine, const void* early,
                             CheckExchange exchange)
    : ctx_(ctx), mine_(mine), exchange_(exchange), all_(ctx.Scratch(kSlotBytes * ctx.size())) {
  uint8_t* own = all_ + kSlotBytes * ctx.rank();
  CallDescriptor sent = mine;
  if (early == nullptr) sent.early_bytes = 0;
  Encode(sent, own);
  const uint64_t ride = sent.Ride();
  if (ride > 0) std::memcpy(own + kDescriptorBytes, early, ride);
  if (ctx.size() == 1) return;
  const bool direct = exchange_ == CheckExchange::kDirect;
  if (direct) {
    // Eagerly: a pull of a descriptor with 64 KiB riding costs a round trip that a 2-rank call
    // of 64 KiB waits for (51.1 µs pulled against 40.6 eagerly, perf/RESULTS.md).
    sends_ = ctx.SendToMembers(Phase::kArgCheck, 0, own, kDescriptorBytes + ride,
                               CollectiveContext::Delivery::kEager);
  }
  const auto* rest = static_cast<const uint8_t*>(early) + ride;
  if (sent.early_to < 0) {
    if (sent.early_bytes > ride) {
      rest_sends_ = ctx.SendToMembers(sent.early_phase, 0, rest, sent.early_bytes - ride);
    }
  } else {
    uint32_t k = 0;
    for (uint64_t length : sent.RestMessagesTo(sent.early_to)) {
      rest_sends_.push_back(ctx.Send(sent.early_to, sent.early_phase, 0, k++, rest, length));
      rest += length;
    }
  }
  for (int peer = 0; direct && peer < ctx.size(); ++peer) {
    if (peer == ctx.rank()) continue;
    receives_.push_back(
        ctx.RecvUpTo(peer, Phase::kArgCheck, 0, 0, all_ + kSlotBytes * peer, kSlotBytes));
  }
}

size_t ArgumentCheck::SlotLength(const uint8_t* slot) const {
  return kDescriptorBytes + DecodeShared(mine_, slot).Ride();
}

absl::Status ArgumentCheck::AwaitDirect() {
  std::vector<CollectiveContext::Pending> pending = receives_;
  pending.insert(pending.end(), sends_.begin(), sends_.end());  // Not the rest: the run waits.
  if (absl::Status s = ctx_.WaitAll(pending); !s.ok()) return s;
  // A member's message is its descriptor and as much of its early data as the descriptor says.
  size_t next = 0;
  for (int peer = 0; peer < ctx_.size(); ++peer) {
    if (peer == ctx_.rank()) continue;
    const size_t length = receives_[next++].request->bytes();
    if (length < kDescriptorBytes || length != SlotLength(slot(peer))) {
      return ctx_.PeerError(peer, absl::DataLossError(absl::StrFormat(
                                      "argument check message of %d bytes does not match its "
                                      "descriptor (a different build, or a corrupted message)",
                                      length)));
    }
  }
  return absl::OkStatus();
}

absl::Status ArgumentCheck::ExchangeForwarded() {
  const int n = ctx_.size(), r = ctx_.rank();
  // Before each step this rank holds the slots of ranks r .. r+held-1 (mod n); it sends the first
  // min(held, n-held) of them to the rank `held` below and receives as many from `held` above.
  const size_t most = static_cast<size_t>(n / 2) * kSlotBytes;
  uint8_t* out = ctx_.Scratch(most);
  uint8_t* in = ctx_.Scratch(most);
  uint32_t step = 0;
  for (int held = 1; held < n; held *= 2, ++step) {
    const int count = std::min(held, n - held);
    const int to = (r - held + n) % n, from = (r + held) % n;
    size_t length = 0;
    for (int i = 0; i < count; ++i) {
      const uint8_t* held_slot = slot((r + i) % n);
      const size_t slot_length = SlotLength(held_slot);
      std::memcpy(out + length, held_slot, slot_length);
      length += slot_length;
    }
    const CollectiveContext::Pending received =
        ctx_.RecvUpTo(from, Phase::kArgCheck, step, 0, in, static_cast<size_t>(count) * kSlotBytes);
    const CollectiveContext::Pending sent =
        ctx_.Send(to, Phase::kArgCheck, step, 0, out, length, CollectiveContext::Delivery::kEager);
    if (absl::Status s = ctx_.WaitAll({received, sent}); !s.ok()) return s;
    // `from`'s message: the slots of ranks from .. from+count-1, each as long as it announces.
    const size_t got = received.request->bytes();
    size_t at = 0;
    int parsed = 0;
    for (; parsed < count && got - at >= kDescriptorBytes; ++parsed) {
      const size_t slot_length = SlotLength(in + at);
      if (got - at < slot_length) break;
      std::memcpy(all_ + kSlotBytes * ((from + parsed) % n), in + at, slot_length);
      at += slot_length;
    }
    if (parsed != count || at != got) {
      return ctx_.PeerError(from,
                            absl::DataLossError(absl::StrFormat(
                                "argument check message of %d bytes (step %d) does not hold the %d "
                                "descriptors it should (a different build, or a corrupted message)",
                                got, step, count)));
    }
  }
  return absl::OkStatus();
}

absl::Status ArgumentCheck::Verdict(std::vector<CallDescriptor>* all_descriptors) {
  const int n = ctx_.size();
  if (all_descriptors != nullptr) all_descriptors->assign(n, mine_);
  if (n == 1) return absl::OkStatus();
  const absl::Status exchanged =
      exchange_ == CheckExchange::kDirect ? AwaitDirect() : ExchangeForwarded();
  if (!exchanged.ok()) return exchanged;
  // Field offsets within the descriptor, in kFields order.
  const size_t offsets[] = {0, 1, 2, 3, 4, 8, 16, 20, 24, 40, 60, 19};
  const size_t sizes[] = {1, 1, 1, 1, 4, 8, 1, 4, 8, 8, 4, 1};
  if (all_descriptors != nullptr) {
    for (int peer = 0; peer < n; ++peer) {
      (*all_descriptors)[peer] = DecodeShared(mine_, slot(peer));
    }
  }
  std::vector<std::string> differences;
  for (size_t f = 0; f < std::size(kFields); ++f) {
    bool differs = false;
    for (int peer = 1; peer < n; ++peer) {
      differs |= std::memcmp(slot(0) + offsets[f], slot(peer) + offsets[f], sizes[f]) != 0;
    }
    if (!differs) continue;
    std::vector<std::string> values;
    for (int peer = 0; peer < n; ++peer) {
      values.push_back(absl::StrFormat("rank %d=%s", peer, kFields[f].format(slot(peer))));
    }
    differences.push_back(absl::StrFormat("%s (%s)", kFields[f].name, absl::StrJoin(values, ", ")));
  }
  if (differences.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s on rank %d: arguments differ across ranks; no data was used: %s",
                      CollectiveName(mine_.kind), ctx_.rank(), absl::StrJoin(differences, "; ")));
}

EarlyData ArgumentCheck::Early() const {
  EarlyData early{.rest_sends = rest_sends_};
  for (int peer = 0; peer < ctx_.size(); ++peer) {
    const CallDescriptor theirs = DecodeShared(mine_, slot(peer));
    early.ridden.emplace_back(slot(peer) + kDescriptorBytes, theirs.Ride());
  }
  return early;
}

absl::Status ArgumentCheck::DiscardEarlyData() {
  std::vector<CollectiveContext::Pending> pending;
  for (int peer = 0; peer < ctx_.size(); ++peer) {
    const CallDescriptor theirs = DecodeShared(mine_, slot(peer));
    if (peer == ctx_.rank() || theirs.early_bytes > kMaxEarlyBytes ||
        (theirs.early_to >= 0 && theirs.early_segment_bytes < kMinEarlySegmentBytes)) {
      continue;  // Not what this build sends: left to the link's bound on unexpected messages.
    }
    uint32_t k = 0;
    for (uint64_t length : theirs.RestMessagesTo(ctx_.rank())) {
      pending.push_back(ctx_.Recv(peer, theirs.early_phase, 0, k++, ctx_.Scratch(length), length));
    }
  }
  return ctx_.WaitAll(pending);
}

}  // namespace hmc
