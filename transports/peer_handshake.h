#ifndef HMC_TRANSPORTS_PEER_HANDSHAKE_H_
#define HMC_TRANSPORTS_PEER_HANDSHAKE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/wire.h"

namespace hmc {

// The handshake and notices of transports whose addresses come through the coordinator and whose
// links then prove the token over their own control messages (UCX, libfabric). Each side sends
// a challenge (a fresh nonce); each answers the other's with a hello {world, rank, to_rank,
// epoch, HMAC-SHA256 over them and the nonce}; a hello that checks out is accepted, any other
// refused with the reason, which the peer reports. Data flows once both sides accepted.
enum class ControlMessage : uint8_t {
  kChallenge = 1,  // {world, nonce}: sent on a new link.
  kHello = 2,      // {world, rank, to_rank, epoch, proof over the peer's nonce}.
  kAccept = 3,     // {}: the peer's hello checked out; data may flow.
  kRefuse = 4,     // {reason}: the hello did not.
  kLeave = 5,      // {reason}: the sender closed or failed the link.
  kGoodbye = 6,    // {}: the sender shuts down; it sends nothing after this.
};

struct HandshakeSettings {
  std::string token;
  std::string world_id;
  uint32_t epoch = 1;
};

std::vector<uint8_t> StringsPayload(std::initializer_list<std::string> strings);
// The first string of a payload (a refusal's or a notice's reason).
std::string FirstString(std::span<const uint8_t> payload);
// The hello that answers `challenge`, or a refusal's reason in `reason`.
std::vector<uint8_t> AnswerChallenge(const HandshakeSettings& settings, int rank, int to_rank,
                                     std::span<const uint8_t> challenge, std::string* reason);
// Empty when `hello` proves the token for the link from `peer_rank` to `rank` over `nonce`
// (this side's challenge); else why not.
std::string CheckHello(const HandshakeSettings& settings, int rank, int peer_rank,
                       const std::string& nonce, std::span<const uint8_t> hello);

// What a link of such a transport offers the handshake: its channel's methods.
//   void SendControl(ControlMessage, const std::vector<uint8_t>&);
//   void Fail(const absl::Status&, bool tell_peer, bool notify);
//   absl::Status Error(const std::string& what) const;
//   void OnReady();  void OnGoodbye();  bool failed() const;  int peer_rank() const;
//   std::string nonce;  bool hello_sent, peer_proven, peer_accepted, goodbye_sent;
// Tells the peer that `channel` sends nothing more, once: at this side's shutdown, or in answer to
// the peer's own goodbye.
template <typename Link>
void SayGoodbyeOnce(Link& channel) {
  if (channel.goodbye_sent) return;
  channel.SendControl(ControlMessage::kGoodbye, {});
  channel.goodbye_sent = true;
}

// Handles one control message that arrived on `channel`.
template <typename Link>
void OnControlMessage(const HandshakeSettings& settings, int rank, Link& channel,
                      ControlMessage type, std::span<const uint8_t> payload) {
  if (channel.failed()) return;
  auto refuse = [&](const std::string& reason) {
    channel.SendControl(ControlMessage::kRefuse, StringsPayload({reason}));
    channel.Fail(channel.Error(absl::StrCat("refused its handshake: ", reason)),
                 /*tell_peer=*/false, /*notify=*/false);
  };
  switch (type) {
    case ControlMessage::kChallenge: {
      if (channel.hello_sent) return;
      std::string reason;
      const std::vector<uint8_t> hello =
          AnswerChallenge(settings, rank, channel.peer_rank(), payload, &reason);
      if (!reason.empty()) return refuse(reason);
      channel.SendControl(ControlMessage::kHello, hello);
      channel.hello_sent = true;
      return;
    }
    case ControlMessage::kHello: {
      if (channel.peer_proven) return;
      const std::string reason =
          CheckHello(settings, rank, channel.peer_rank(), channel.nonce, payload);
      if (!reason.empty()) return refuse(reason);
      channel.peer_proven = true;
      channel.SendControl(ControlMessage::kAccept, {});
      if (channel.peer_accepted) channel.OnReady();
      return;
    }
    case ControlMessage::kAccept:
      channel.peer_accepted = true;
      if (channel.peer_proven) channel.OnReady();
      return;
    case ControlMessage::kRefuse:
      channel.Fail(
          channel.Error(absl::StrCat("refused this rank's handshake: ", FirstString(payload))),
          /*tell_peer=*/false, /*notify=*/true);
      return;
    case ControlMessage::kLeave:
      // Notices count only from a peer that proved the token.
      if (channel.peer_proven) {
        channel.Fail(channel.Error(absl::StrCat("closed the link: ", FirstString(payload))),
                     /*tell_peer=*/false, /*notify=*/true);
      }
      return;
    case ControlMessage::kGoodbye:
      if (channel.peer_proven) channel.OnGoodbye();
      return;
  }
}

}  // namespace hmc

#endif  // HMC_TRANSPORTS_PEER_HANDSHAKE_H_
