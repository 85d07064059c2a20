#include "core/coordinator_protocol.h"

#include "absl/strings/str_cat.h"
#include "core/auth.h"
#include "core/options.h"
#include "core/wire.h"

namespace hmc {
namespace {

constexpr uint32_t kMaxRejoinMembers = 1 << 16;

}  // namespace

std::vector<uint8_t> JoinRequest::Serialize() const {
  WireWriter w;
  w.PutString(world_id);
  w.Put<int32_t>(rank);
  w.Put<int32_t>(world_size);
  w.PutString(address);
  w.PutString(zone);
  w.PutString(hostname);
  w.Put<int32_t>(cpus);
  w.PutString(nonce);
  w.PutString(proof);
  w.Put<uint32_t>(epoch);
  w.Put<uint32_t>(static_cast<uint32_t>(members.size()));
  for (int32_t id : members) w.Put<int32_t>(id);
  return w.bytes();
}

absl::StatusOr<JoinRequest> JoinRequest::Parse(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  JoinRequest j;
  j.world_id = r.GetString();
  j.rank = r.Get<int32_t>();
  j.world_size = r.Get<int32_t>();
  j.address = r.GetString();
  j.zone = r.GetString();
  j.hostname = r.GetString();
  j.cpus = r.Get<int32_t>();
  j.nonce = r.GetString();
  j.proof = r.GetString();
  j.epoch = r.Get<uint32_t>();
  const uint32_t members = r.Get<uint32_t>();
  if (members > kMaxRejoinMembers) return absl::DataLossError("malformed join request");
  for (uint32_t i = 0; i < members; ++i) j.members.push_back(r.Get<int32_t>());
  if (!r.done()) return absl::DataLossError("malformed join request");
  return j;
}

std::vector<uint8_t> Welcome::Serialize() const {
  WireWriter w;
  w.Put<int32_t>(rank);
  w.Put<int32_t>(world_size);
  w.PutString(proof);
  return w.bytes();
}

absl::StatusOr<Welcome> Welcome::Parse(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  Welcome w;
  w.rank = r.Get<int32_t>();
  w.world_size = r.Get<int32_t>();
  w.proof = r.GetString();
  if (!r.done()) return absl::DataLossError("malformed welcome");
  return w;
}

std::string JoinRequest::Proof(const std::string& token, const std::string& server_nonce) const {
  JoinRequest asserted = *this;
  asserted.proof.clear();
  const std::vector<uint8_t> bytes = asserted.Serialize();
  return ComputeProof(
      token, kJoinLabel,
      {server_nonce, absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
}

std::string Welcome::Proof(const std::string& token, const std::string& client_nonce,
                           const std::string& server_nonce) const {
  return ComputeProof(token, kWelcomeLabel,
                      {client_nonce, server_nonce, absl::StrCat(rank), absl::StrCat(world_size)});
}

std::vector<uint8_t> KvMessage::Serialize() const {
  WireWriter w;
  w.Put<uint64_t>(request);
  w.PutString(key);
  w.PutString(value);
  w.Put<int64_t>(wait_ms);
  w.Put<uint8_t>(found ? 1 : 0);
  return w.bytes();
}

absl::StatusOr<KvMessage> KvMessage::Parse(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  KvMessage m;
  m.request = r.Get<uint64_t>();
  m.key = r.GetString();
  m.value = r.GetString();
  m.wait_ms = r.Get<int64_t>();
  m.found = r.Get<uint8_t>() != 0;
  if (!r.done()) return absl::DataLossError("malformed key-value message");
  return m;
}

std::string CoordinatorTlsKey(const std::string& token, const std::string& server_nonce) {
  return ComputeProof(token, "hmc-coordinator-tls-psk", {server_nonce});
}

absl::Duration HeartbeatTimeout(absl::Duration configured, absl::Duration round_trip) {
  if (configured > absl::ZeroDuration()) return configured;
  return std::max(kAutoLivenessTimeout, 10 * round_trip);
}

std::vector<uint8_t> Suspicion::Serialize() const {
  WireWriter w;
  w.Put<uint32_t>(epoch);
  w.Put<int32_t>(rank);
  w.PutString(cause);
  return w.bytes();
}

absl::StatusOr<Suspicion> Suspicion::Parse(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  Suspicion m;
  m.epoch = r.Get<uint32_t>();
  m.rank = r.Get<int32_t>();
  m.cause = r.GetString();
  if (!r.done()) return absl::DataLossError("malformed suspicion");
  return m;
}

std::string LinkProbeKey(const std::string& world_id) {
  return absl::StrCat("hmc/links/", world_id, "/newest");
}

std::string ResumedKeyPrefix(const std::string& world_id) {
  return absl::StrCat("hmc/resumed/", world_id, "/");
}

std::string ReadyKeyPrefix(const std::string& world_id) {
  return absl::StrCat("hmc/ready/", world_id, "/");
}

std::vector<uint8_t> SerializeString(const std::string& s) {
  WireWriter w;
  w.PutString(s);
  return w.bytes();
}

absl::StatusOr<std::string> ParseString(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  std::string s = r.GetString();
  if (!r.done()) return absl::DataLossError("malformed string payload");
  return s;
}

}  // namespace hmc
