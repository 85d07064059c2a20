#include "transports/peer_handshake.h"

#include "absl/strings/str_format.h"
#include "core/auth.h"

namespace hmc {
namespace {

constexpr char kHelloLabel[] = "hmc-peer-hello";

std::string HelloProof(const std::string& token, const std::string& world, int rank, int to_rank,
                       uint32_t epoch, const std::string& nonce) {
  return ComputeProof(
      token, kHelloLabel,
      {world, absl::StrCat(rank), absl::StrCat(to_rank), absl::StrCat(epoch), nonce});
}

}  // namespace

std::vector<uint8_t> StringsPayload(std::initializer_list<std::string> strings) {
  WireWriter w;
  for (const std::string& s : strings) w.PutString(s);
  return w.bytes();
}

std::string FirstString(std::span<const uint8_t> payload) {
  WireReader r(payload);
  return r.GetString();
}

std::vector<uint8_t> AnswerChallenge(const HandshakeSettings& settings, int rank, int to_rank,
                                     std::span<const uint8_t> challenge, std::string* reason) {
  WireReader r(challenge);
  const std::string world = r.GetString();
  const std::string nonce = r.GetString();
  if (!r.done()) {
    *reason = "a malformed challenge";
    return {};
  }
  if (world != settings.world_id) {
    *reason = absl::StrFormat("world '%s', this rank's is '%s'", world, settings.world_id);
    return {};
  }
  WireWriter hello;
  hello.PutString(settings.world_id);
  hello.Put<int32_t>(rank);
  hello.Put<int32_t>(to_rank);
  hello.Put<uint32_t>(settings.epoch);
  hello.PutString(
      HelloProof(settings.token, settings.world_id, rank, to_rank, settings.epoch, nonce));
  return hello.bytes();
}

std::string CheckHello(const HandshakeSettings& settings, int rank, int peer_rank,
                       const std::string& nonce, std::span<const uint8_t> hello) {
  WireReader r(hello);
  const std::string world = r.GetString();
  const int32_t from = r.Get<int32_t>();
  const int32_t to = r.Get<int32_t>();
  const uint32_t epoch = r.Get<uint32_t>();
  const std::string proof = r.GetString();
  if (!r.done()) return "a malformed hello";
  if (world != settings.world_id || from != peer_rank || to != rank) {
    return absl::StrFormat("world '%s' rank %d to rank %d, expected world '%s' rank %d to %d",
                           world, from, to, settings.world_id, peer_rank, rank);
  }
  if (epoch != settings.epoch) {
    return absl::StrFormat("mismatched settings: peer has epoch %d, this rank epoch %d", epoch,
                           settings.epoch);
  }
  if (!ProofsEqual(proof, HelloProof(settings.token, world, from, to, epoch, nonce))) {
    return "wrong token (the hello's proof does not match)";
  }
  return "";
}

}  // namespace hmc
