#ifndef HMC_CORE_COORDINATOR_PROTOCOL_H_
#define HMC_CORE_COORDINATOR_PROTOCOL_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hmc {

// Payloads of the coordinator protocol, shared by the service and its client.
//   server: Challenge{nonce}
//   client: a TLS 1.3 handshake (first byte 0x16) where either side's `tls` wants it; every byte
//           after it, both ways, is TLS records
//   client: Join{world, rank, size, address, zone, host, nonce, proof, epoch, members}
//   server: Welcome{rank, size, proof} | Error{message}
// Each proof covers everything its sender asserts (JoinRequest::Proof, Welcome::Proof).
//   then the client sends KvPut / KvGet / Heartbeat / Leave and the server KvValue / PeerTable.
inline constexpr char kJoinLabel[] = "hmc-join";
inline constexpr char kWelcomeLabel[] = "hmc-welcome";

// The TLS 1.3 pre-shared key of one coordinator connection (without certificates): both ends know
// the token and the challenge's nonce, nobody else can finish the handshake.
std::string CoordinatorTlsKey(const std::string& token, const std::string& server_nonce);

// How long a rank may stay silent before the coordinator declares it failed: `configured` when
// set (option heartbeat_timeout), else ten round trips of its connection and at least
// kAutoLivenessTimeout.
absl::Duration HeartbeatTimeout(absl::Duration configured, absl::Duration round_trip);

struct JoinRequest {
  std::string world_id;
  int32_t rank = -1;
  int32_t world_size = 0;
  std::string address;
  std::string zone;
  std::string hostname;
  int32_t cpus = 0;  // CPUs online on its host (the tuner's picture of ranks that share cores).
  std::string nonce;
  std::string proof;
  // A rank of a running group coming back to a restarted coordinator: the epoch it is in and
  // that epoch's members (stable ids). 0 and empty for a first join.
  uint32_t epoch = 0;
  std::vector<int32_t> members;

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<JoinRequest> Parse(std::span<const uint8_t> bytes);
  // HMAC over the coordinator's nonce and every field but `proof`: whatever the rank asserts
  // (world, rank, size, address, zone, host, epoch, members) is bound to the token.
  std::string Proof(const std::string& token, const std::string& server_nonce) const;
};

struct Welcome {
  int32_t rank = -1;
  int32_t world_size = 0;
  std::string proof;

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<Welcome> Parse(std::span<const uint8_t> bytes);
  // HMAC over both nonces, the assigned rank and the world size.
  std::string Proof(const std::string& token, const std::string& client_nonce,
                    const std::string& server_nonce) const;
};

struct KvMessage {
  uint64_t request = 0;
  std::string key;
  std::string value;    // KvPut: the value; KvValue: the value found.
  int64_t wait_ms = 0;  // KvGet: how long the server may hold the request.
  bool found = false;   // KvValue.

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<KvMessage> Parse(std::span<const uint8_t> bytes);
};

// A rank's report that a peer failed on the data path (its connection broke, or it did not answer
// within a collective's deadline) while the group was at `epoch`. The coordinator declares the
// peer failed unless the report is about an epoch that already ended.
struct Suspicion {
  uint32_t epoch = 0;
  int32_t rank = -1;
  std::string cause;

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<Suspicion> Parse(std::span<const uint8_t> bytes);
};

// The key under which the newest link probe of a world is kept (LinkProbeRecord): what a rank
// that joins later infers its links from.
std::string LinkProbeKey(const std::string& world_id);

// The key-value key under which a rank tells the coordinator that the first averaging round of an
// epoch committed (the coordinator logs the time to recover): the prefix, then the epoch.
std::string ResumedKeyPrefix(const std::string& world_id);
// The key under which a rank says it finished setting up (its collective probes): the prefix, then
// its id. The coordinator admits a rank into a running group only when every member has.
std::string ReadyKeyPrefix(const std::string& world_id);

std::vector<uint8_t> SerializeString(const std::string& s);
absl::StatusOr<std::string> ParseString(std::span<const uint8_t> bytes);

}  // namespace hmc

#endif  // HMC_CORE_COORDINATOR_PROTOCOL_H_
