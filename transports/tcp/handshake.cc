#include "transports/tcp/handshake.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/auth.h"
#include "core/coordinator_protocol.h"
#include "core/frame_io.h"
#include "core/wire.h"

namespace hmc {

std::vector<uint8_t> PeerHello::Serialize() const {
  WireWriter w;
  w.PutString(world_id);
  w.Put<int32_t>(rank);
  w.Put<int32_t>(to_rank);
  w.Put<uint16_t>(stream);
  w.Put<uint16_t>(streams);
  w.Put<uint32_t>(epoch);
  w.Put<uint8_t>(integrity);
  w.Put<uint8_t>(tls ? 1 : 0);
  w.PutString(nonce);
  w.PutString(proof);
  return w.bytes();
}

absl::StatusOr<PeerHello> PeerHello::Parse(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  PeerHello h;
  h.world_id = r.GetString();
  h.rank = r.Get<int32_t>();
  h.to_rank = r.Get<int32_t>();
  h.stream = r.Get<uint16_t>();
  h.streams = r.Get<uint16_t>();
  h.epoch = r.Get<uint32_t>();
  h.integrity = r.Get<uint8_t>();
  const uint8_t tls = r.Get<uint8_t>();
  h.tls = tls != 0;
  h.nonce = r.GetString();
  h.proof = r.GetString();
  if (!r.done() || tls > 1) return absl::DataLossError("malformed peer hello");
  return h;
}

std::string PeerHello::Proof(const std::string& token, const std::string& acceptor_nonce) const {
  PeerHello asserted = *this;
  asserted.proof.clear();
  const std::vector<uint8_t> bytes = asserted.Serialize();
  return ComputeProof(
      token, "hmc-peer",
      {acceptor_nonce,
       absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
}

std::string PeerAcceptProof(const std::string& token, const PeerHello& hello,
                            const std::string& acceptor_nonce) {
  return ComputeProof(token, "hmc-peer-ok",
                      {hello.nonce, acceptor_nonce, hello.world_id, absl::StrCat(hello.to_rank),
                       absl::StrCat(hello.rank)});
}

StreamSecrets DeriveStreamSecrets(const std::string& token, const PeerHello& hello,
                                  const std::string& acceptor_nonce) {
  const std::string stream = absl::StrCat(hello.world_id, "/", hello.rank, "/", hello.to_rank, "/",
                                          hello.stream, "/", hello.epoch);
  auto derive = [&](absl::string_view label) {
    return ComputeProof(token, label, {hello.nonce, acceptor_nonce, stream});
  };
  return StreamSecrets{derive("hmc-frames-to-acceptor"), derive("hmc-frames-to-connector"),
                       derive("hmc-tls-psk")};
}

absl::StatusOr<StreamSecrets> ConnectorHandshake(int fd, PeerHello hello, const std::string& token,
                                                 absl::Time deadline) {
  absl::StatusOr<Frame> challenge = ReadControlFrame(fd, deadline);
  if (!challenge.ok()) return challenge.status();
  if (challenge->header.type != FrameType::kPeerChallenge) {
    return absl::DataLossError(
        absl::StrFormat("expected a challenge, got %s", FrameTypeName(challenge->header.type)));
  }
  absl::StatusOr<std::string> acceptor_nonce = ParseString(challenge->payload);
  if (!acceptor_nonce.ok()) return acceptor_nonce.status();
  hello.nonce = RandomNonce();
  hello.proof = hello.Proof(token, *acceptor_nonce);
  if (absl::Status s = WriteControlFrame(fd, FrameType::kPeerHello, hello.Serialize(), deadline);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Frame> reply = ReadControlFrame(fd, deadline);
  if (!reply.ok()) return reply.status();
  absl::StatusOr<std::string> text = ParseString(reply->payload);
  if (!text.ok()) return text.status();
  if (reply->header.type == FrameType::kError) {
    return absl::PermissionDeniedError(absl::StrFormat("refused: %s", *text));
  }
  if (reply->header.type != FrameType::kPeerAccept ||
      !ProofsEqual(*text, PeerAcceptProof(token, hello, *acceptor_nonce))) {
    return absl::PermissionDeniedError("the peer failed to prove the token");
  }
  return DeriveStreamSecrets(token, hello, *acceptor_nonce);
}

}  // namespace hmc
