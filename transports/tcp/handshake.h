#ifndef HMC_TRANSPORTS_TCP_HANDSHAKE_H_
#define HMC_TRANSPORTS_TCP_HANDSHAKE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hmc {

// The peer-to-peer handshake on each TCP stream, connector (higher rank) to acceptor:
//   acceptor:  PeerChallenge{nonce_a}
//   connector: PeerHello{world, rank, to_rank, stream, streams, epoch, protection, nonce_c, proof}
//   acceptor:  PeerAccept{proof'} | Error{message}
// proof binds every field of the hello to the token and nonce_a; proof' binds both nonces, the
// world and both ranks, so the connector knows it reached `to_rank` of its world. Both ends then
// derive the stream's secrets (StreamSecrets) from the token and both nonces.
struct PeerHello {
  std::string world_id;
  int32_t rank = 0;     // The connector's.
  int32_t to_rank = 0;  // The acceptor's, as the connector's peer table says.
  uint16_t stream = 0;
  uint16_t streams = 0;
  uint32_t epoch = 0;
  // What protects the stream from here on; both ends must agree. The frame integrity (a
  // FrameIntegrity value) and whether TLS runs over the stream.
  uint8_t integrity = 0;
  bool tls = false;
  std::string nonce;
  std::string proof;

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<PeerHello> Parse(std::span<const uint8_t> bytes);
  std::string Proof(const std::string& token, const std::string& acceptor_nonce) const;
};

std::string PeerAcceptProof(const std::string& token, const PeerHello& hello,
                            const std::string& acceptor_nonce);

// Fresh for every connection: keys for each direction's frame seals, and the TLS pre-shared key.
// Nobody without the token learns them, and no other connection shares them.
struct StreamSecrets {
  std::string to_acceptor;
  std::string to_connector;
  std::string tls_psk;
};

StreamSecrets DeriveStreamSecrets(const std::string& token, const PeerHello& hello,
                                  const std::string& acceptor_nonce);

// The connector's side on a connected socket: reads the challenge, sends `hello` (its nonce and
// proof filled in here) and checks the acceptor's proof. A refusal comes back with its reason.
absl::StatusOr<StreamSecrets> ConnectorHandshake(int fd, PeerHello hello, const std::string& token,
                                                 absl::Time deadline);

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_HANDSHAKE_H_
