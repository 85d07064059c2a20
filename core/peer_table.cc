#include "core/peer_table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/wire.h"

namespace hmc {

std::vector<uint8_t> PeerTable::Serialize() const {
  WireWriter w;
  w.Put<uint32_t>(epoch);
  w.Put<int32_t>(world_size);
  w.Put<uint32_t>(static_cast<uint32_t>(peers.size()));
  for (const PeerEntry& p : peers) {
    w.Put<int32_t>(p.rank);
    w.PutString(p.address);
    w.PutString(p.zone);
    w.PutString(p.hostname);
    w.Put<int32_t>(p.cpus);
    w.Put<uint8_t>(p.alive ? 1 : p.joining ? 2 : 0);
    w.PutString(p.failure);
    p.joined.Write(w);
  }
  return w.bytes();
}

absl::StatusOr<PeerTable> PeerTable::Parse(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  PeerTable table;
  table.epoch = r.Get<uint32_t>();
  table.world_size = r.Get<int32_t>();
  const uint32_t count = r.Get<uint32_t>();
  if (count > 1u << 20 || table.world_size < 0 ||
      count != static_cast<uint32_t>(table.world_size)) {
    return absl::DataLossError("peer table: inconsistent peer count");
  }
  for (uint32_t i = 0; i < count; ++i) {
    PeerEntry p;
    p.rank = r.Get<int32_t>();
    p.address = r.GetString();
    p.zone = r.GetString();
    p.hostname = r.GetString();
    p.cpus = r.Get<int32_t>();
    const uint8_t state = r.Get<uint8_t>();
    if (state > 2) return absl::DataLossError("peer table: unknown member state");
    p.alive = state == 1;
    p.joining = state == 2;
    p.failure = r.GetString();
    if (absl::Status s = p.joined.Read(r, count); !s.ok()) return s;
    if (p.rank != static_cast<int>(i)) return absl::DataLossError("peer table: ranks out of order");
    table.peers.push_back(std::move(p));
  }
  if (!r.done()) return absl::DataLossError("peer table: truncated or trailing bytes");
  return table;
}

void JoinedLinks::Write(WireWriter& w) const {
  w.Put<uint64_t>(probe);
  w.Put<uint32_t>(static_cast<uint32_t>(rtt_ms.size()));
  for (double rtt : rtt_ms) w.Put<double>(rtt);
}

absl::Status JoinedLinks::Read(WireReader& r, size_t max_ranks) {
  probe = r.Get<uint64_t>();
  const uint32_t count = r.Get<uint32_t>();
  if (count > max_ranks) return absl::DataLossError("joined links: more round trips than ranks");
  rtt_ms.clear();
  for (uint32_t k = 0; k < count; ++k) rtt_ms.push_back(r.Get<double>());
  return absl::OkStatus();
}

std::vector<uint8_t> JoinedLinks::Serialize() const {
  WireWriter w;
  Write(w);
  return w.bytes();
}

absl::StatusOr<JoinedLinks> JoinedLinks::Parse(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  JoinedLinks links;
  // Each round trip takes 8 bytes: no more than that many can be there.
  if (absl::Status s = links.Read(r, bytes.size() / sizeof(double)); !s.ok()) return s;
  if (!r.done()) return absl::DataLossError("joined links: truncated or trailing bytes");
  return links;
}

std::vector<int> PeerTable::Members() const {
  std::vector<int> ids;
  for (const PeerEntry& p : peers) {
    if (p.alive) ids.push_back(p.rank);
  }
  return ids;
}

std::string PeerTable::Describe(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(peers.size())) return absl::StrFormat("rank %d", rank);
  const PeerEntry& p = peers[rank];
  return absl::StrFormat("rank %d (%s, %s)", p.rank, p.hostname, ShortAddress(p.address));
}

std::string ShortAddress(absl::string_view address) {
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(address, ' ')) {
    parts.push_back(part.size() > 40 ? absl::StrCat(part.substr(0, 32), "...") : std::string(part));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace hmc
