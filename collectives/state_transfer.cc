#include "collectives/state_transfer.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/str_format.h"

namespace hmc {
namespace {

constexpr size_t kHashBytes = 32;
// A part's index travels in the tag's 20-bit segment field.
constexpr size_t kMaxParts = size_t{1} << 20;
// Steps of Phase::kState.
constexpr uint32_t kHashStep = 0;
constexpr uint32_t kRequestStep = 1;
constexpr uint32_t kPartStep = 2;

using Hash = std::array<uint8_t, kHashBytes>;

Hash HashPart(const SharedState& state, const StatePart& part) {
  Hash hash{};
  unsigned int length = 0;
  EVP_Digest(state.tensors[part.tensor].second.byte_data() + part.offset, part.bytes, hash.data(),
             &length, EVP_sha256(), nullptr);
  return hash;
}

uint8_t* PartData(const SharedState& state, const StatePart& part) {
  return state.tensors[part.tensor].second.byte_data() + part.offset;
}

// A holder: sends every part's hash to each stale member, then the parts each one asks for.
absl::Status Serve(CollectiveContext& ctx, const std::vector<int>& receivers,
                   const SharedState& state, const std::vector<StatePart>& parts) {
  const size_t hash_bytes = kHashBytes * parts.size();
  uint8_t* hashes = ctx.Scratch(hash_bytes);
  for (size_t i = 0; i < parts.size(); ++i) {
    const Hash h = HashPart(state, parts[i]);
    std::memcpy(hashes + kHashBytes * i, h.data(), kHashBytes);
  }
  std::vector<CollectiveContext::Pending> sends;
  std::vector<CollectiveContext::Pending> requests;
  std::vector<uint32_t*> asked;
  for (int r : receivers) {
    sends.push_back(ctx.Send(r, Phase::kState, kHashStep, 0, hashes, hash_bytes));
    asked.push_back(reinterpret_cast<uint32_t*>(ctx.Scratch(4 * parts.size())));
    requests.push_back(
        ctx.RecvUpTo(r, Phase::kState, kRequestStep, 0, asked.back(), 4 * parts.size()));
  }
  for (size_t k = 0; k < receivers.size(); ++k) {
    size_t received = 0;
    if (absl::Status s = ctx.Wait(requests[k], &received); !s.ok()) return s;
    if (received % 4 != 0) {
      return ctx.PeerError(receivers[k], absl::DataLossError(absl::StrFormat(
                                             "a state request of %d bytes", received)));
    }
    for (size_t j = 0; j < received / 4; ++j) {
      const uint32_t index = asked[k][j];
      if (index >= parts.size()) {
        return ctx.PeerError(receivers[k],
                             absl::DataLossError(absl::StrFormat("asked for state part %d of %d",
                                                                 index, parts.size())));
      }
      sends.push_back(ctx.Send(receivers[k], Phase::kState, kPartStep, index,
                               PartData(state, parts[index]), parts[index].bytes));
    }
  }
  return ctx.WaitAll(sends);
}

// A stale member: takes the holders' hashes, checks they agree, and fetches the parts it lacks,
// striped over the holders.
absl::Status Download(CollectiveContext& ctx, const std::vector<int>& sources,
                      const SharedState& state, const std::vector<StatePart>& parts,
                      StateDownload* download) {
  const size_t hash_bytes = kHashBytes * parts.size();
  std::vector<uint8_t*> lists;
  std::vector<CollectiveContext::Pending> pending;
  for (int s : sources) {
    lists.push_back(ctx.Scratch(hash_bytes));
    pending.push_back(ctx.Recv(s, Phase::kState, kHashStep, 0, lists.back(), hash_bytes));
  }
  if (absl::Status s = ctx.WaitAll(pending); !s.ok()) return s;
  for (size_t k = 1; k < sources.size(); ++k) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (std::memcmp(lists[0] + kHashBytes * i, lists[k] + kHashBytes * i, kHashBytes) != 0) {
        // Asks for nothing, so that the holders finish, and fails: this rank cannot be a member.
        std::vector<CollectiveContext::Pending> none;
        for (int s : sources) none.push_back(ctx.Send(s, Phase::kState, kRequestStep, 0, "", 0));
        ctx.WaitAll(none).IgnoreError();
        return ctx.PeerError(
            sources[k],
            absl::DataLossError(absl::StrFormat(
                "members hold different state: part %d of tensor '%s' differs from what %s "
                "holds",
                i, state.tensors[parts[i].tensor].first,
                ctx.PeerError(sources[0], absl::OkStatus()).message())));
      }
    }
  }
  // Ask each holder for a stripe of the parts this member does not hold already.
  std::vector<std::vector<uint32_t>> asks(sources.size());
  std::vector<int> source_of(parts.size(), -1);
  int next = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (std::memcmp(HashPart(state, parts[i]).data(), lists[0] + kHashBytes * i, kHashBytes) == 0) {
      continue;
    }
    source_of[i] = next;
    asks[next].push_back(static_cast<uint32_t>(i));
    next = (next + 1) % static_cast<int>(sources.size());
  }
  std::vector<CollectiveContext::Pending> sends;
  for (size_t k = 0; k < sources.size(); ++k) {
    uint8_t* list = ctx.Scratch(4 * asks[k].size() + 1);
    std::memcpy(list, asks[k].data(), 4 * asks[k].size());
    sends.push_back(ctx.Send(sources[k], Phase::kState, kRequestStep, 0, list, 4 * asks[k].size()));
  }
  std::vector<std::pair<size_t, CollectiveContext::Pending>> fetches;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (source_of[i] < 0) continue;
    fetches.emplace_back(
        i, ctx.Recv(sources[source_of[i]], Phase::kState, kPartStep, static_cast<uint32_t>(i),
                    PartData(state, parts[i]), parts[i].bytes));
  }
  for (const auto& [i, fetch] : fetches) {
    if (absl::Status s = ctx.Wait(fetch); !s.ok()) return s;
    if (std::memcmp(HashPart(state, parts[i]).data(), lists[0] + kHashBytes * i, kHashBytes) != 0) {
      return ctx.PeerError(sources[source_of[i]],
                           absl::DataLossError(absl::StrFormat(
                               "state part %d of tensor '%s' does not match its hash", i,
                               state.tensors[parts[i].tensor].first)));
    }
    download->bytes += parts[i].bytes;
    ++download->parts_downloaded;
  }
  for (size_t k = 0; k < sources.size(); ++k) {
    if (!asks[k].empty()) download->sources.push_back(sources[k]);
  }
  return ctx.WaitAll(sends);
}

}  // namespace

size_t SharedState::bytes() const {
  size_t total = 0;
  for (const auto& [name, buffer] : tensors) total += buffer.bytes();
  return total;
}

uint64_t SharedState::Fingerprint() const {
  if (tensors.empty()) return 0;
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha256(), nullptr);
  for (const auto& [name, buffer] : tensors) {
    const uint64_t fields[2] = {static_cast<uint64_t>(buffer.dtype), buffer.count};
    EVP_DigestUpdate(md, name.data(), name.size() + 1);  // With its terminator: names stay apart.
    EVP_DigestUpdate(md, fields, sizeof(fields));
  }
  Hash hash{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(md, hash.data(), &length);
  EVP_MD_CTX_free(md);
  uint64_t fingerprint;
  std::memcpy(&fingerprint, hash.data(), sizeof(fingerprint));
  return fingerprint | 1;  // Never 0, which means "no state".
}

std::vector<StatePart> SplitState(const SharedState& state, size_t part_bytes) {
  std::vector<StatePart> parts;
  for (size_t t = 0; t < state.tensors.size(); ++t) {
    const size_t bytes = state.tensors[t].second.bytes();
    for (size_t offset = 0; offset < bytes; offset += part_bytes) {
      parts.push_back(StatePart{static_cast<int>(t), offset, std::min(part_bytes, bytes - offset)});
    }
  }
  return parts;
}

size_t StatePartBytes(size_t total, int sources) {
  constexpr size_t kMinPart = 256 << 10;
  constexpr size_t kMaxPart = 16 << 20;
  const size_t per_source = total / (4 * static_cast<size_t>(std::max(sources, 1)));
  return std::max(std::clamp(per_source, kMinPart, kMaxPart), total / (kMaxParts / 2) + 1);
}

absl::Status TransferState(CollectiveContext& ctx, const std::vector<uint8_t>& stale,
                           const SharedState& state, StateDownload* download) {
  std::vector<int> sources, receivers;
  for (int r = 0; r < ctx.size(); ++r) (stale[r] ? receivers : sources).push_back(r);
  if (receivers.empty() || sources.empty() || state.bytes() == 0) return absl::OkStatus();
  const absl::Time start = absl::Now();
  const std::vector<StatePart> parts =
      SplitState(state, StatePartBytes(state.bytes(), static_cast<int>(sources.size())));
  absl::Status status;
  if (stale[ctx.rank()]) {
    *download = StateDownload{};
    download->parts = static_cast<int>(parts.size());
    status = Download(ctx, sources, state, parts, download);
    download->time = absl::Now() - start;
  } else {
    status = Serve(ctx, receivers, state, parts);
  }
  ctx.EndPhase("state transfer");
  return status;
}

}  // namespace hmc
