#ifndef HMC_CORE_COORDINATOR_PROTOCOL_H_
#define HMC_CORE_COORDINATOR_PROTOCOL_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hmc {

// Payloads of the coordinator protocol, shared by the service and its client.
//   server: Challenge{nonce}
//   client: Join{world, rank, size, address, zone, host, nonce, proof}
//   server: Welcome{rank, size, proof} | Error{message}
//   then the client sends KvPut / KvGet / Heartbeat / Leave and the server KvValue / PeerTable.
inline constexpr char kJoinLabel[] = "hmc-join";
inline constexpr char kWelcomeLabel[] = "hmc-welcome";

struct JoinRequest {
  std::string world_id;
  int32_t rank = -1;
  int32_t world_size = 0;
  std::string address;
  std::string zone;
  std::string hostname;
  std::string nonce;
  std::string proof;

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<JoinRequest> Parse(std::span<const uint8_t> bytes);
};

struct Welcome {
  int32_t rank = -1;
  int32_t world_size = 0;
  std::string proof;

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<Welcome> Parse(std::span<const uint8_t> bytes);
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

std::vector<uint8_t> SerializeString(const std::string& s);
absl::StatusOr<std::string> ParseString(std::span<const uint8_t> bytes);

}  // namespace hmc

#endif  // HMC_CORE_COORDINATOR_PROTOCOL_H_
