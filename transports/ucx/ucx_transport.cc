#include "transports/ucx/ucx_transport.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/auth.h"
#include "core/fnv.h"
#include "core/log.h"
#include "core/wire.h"

namespace hmc {
namespace {

constexpr char kAddressPrefix[] = "ucx:";
constexpr char kHelloLabel[] = "hmc-ucx-hello";
constexpr size_t kMaxEarlyChallenges = 4096;

// This host's boot and network namespace: peers whose addresses name the same share memory and
// have no network between them (Channel::local).
std::string HostAndNamespace() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  char ns[128] = {};
  const ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  const std::string key = absl::StrCat(boot_id, "/", n > 0 ? std::string(ns, n) : "");
  return absl::StrFormat("%016x", Fnv1a(key.data(), key.size()));
}

std::vector<uint8_t> Payload(std::initializer_list<std::string> strings) {
  WireWriter w;
  for (const std::string& s : strings) w.PutString(s);
  return w.bytes();
}

std::string HelloProof(const std::string& token, const std::string& world, int rank, int to_rank,
                       uint32_t epoch, const std::string& nonce) {
  return ComputeProof(
      token, kHelloLabel,
      {world, absl::StrCat(rank), absl::StrCat(to_rank), absl::StrCat(epoch), nonce});
}

}  // namespace

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(
    const UcxTransportConfig& config) {
  if (absl::Status s = RequireToken(config.token, config.insecure, "rank transport"); !s.ok()) {
    return s;
  }
  std::unique_ptr<UcxTransport> transport(new UcxTransport(config));
  absl::StatusOr<std::unique_ptr<UcxWorker>> worker = UcxWorker::Create(config.resources);
  if (!worker.ok()) return worker.status();
  transport->worker_ = std::move(*worker);
  transport->host_ = HostAndNamespace();
  transport->address_ = absl::StrCat(kAddressPrefix, transport->host_, ":",
                                     absl::BytesToHexString(transport->worker_->address()));
  ucs_status_t status = UCS_OK;
  transport->worker_->RunAndWait([&] {
    for (auto [id, callback] : {std::pair{UcxAm::kControl, &UcxTransport::ControlArrived},
                                std::pair{UcxAm::kData, &UcxTransport::DataArrived}}) {
      ucp_am_handler_param_t handler{};
      handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                           UCP_AM_HANDLER_PARAM_FIELD_ARG;
      handler.id = static_cast<unsigned>(id);
      handler.cb = callback;
      handler.arg = transport.get();
      if (status == UCS_OK) {
        status = ucp_worker_set_am_recv_handler(transport->worker_->worker(), &handler);
      }
    }
  });
  if (status != UCS_OK) return UcxError(status, "UCX: setting the message handlers");
  return transport;
}

UcxTransport::~UcxTransport() {
  if (worker_ == nullptr) return;
  if (!shut_down_) Shutdown(absl::Now());
  worker_->RunAndWait([&] { channels_.clear(); });
  worker_.reset();
}

void UcxTransport::SetFailureCallback(FailureCallback callback) {
  MutexLock lock(&mu_);
  failure_callback_ = std::move(callback);
}

void UcxTransport::OnChannelFailed(int rank, const absl::Status& why) {
  Logf("ucx", "rank %d: link to rank %d failed: %s", rank_, rank, why.message());
  FailureCallback callback;
  {
    MutexLock lock(&mu_);
    callback = failure_callback_;
  }
  if (callback) callback(rank, why);
}

std::shared_ptr<UcxChannel> UcxTransport::AddChannel(const PeerAddress& peer) {
  auto channel = std::make_shared<UcxChannel>(
      worker_.get(), rank_, peer,
      [this](int rank, const absl::Status& why) { OnChannelFailed(rank, why); });
  channels_[peer.rank] = channel;
  // "ucx:HOST:HEX"
  const std::vector<std::string> parts = absl::StrSplit(peer.address, ':');
  const bool hex = parts.size() == 3 && !parts[2].empty() && parts[2].size() % 2 == 0 &&
                   absl::c_all_of(parts[2], [](char c) { return absl::ascii_isxdigit(c); });
  if (!hex || parts[0] + ":" != kAddressPrefix) {
    channel->Fail(channel->Error(absl::StrFormat(
                      "publishes no UCX address (it published '%s'): every rank of a link must "
                      "run the UCX transport",
                      peer.address.substr(0, 80))),
                  /*tell_peer=*/false, /*notify=*/false);
    return channel;
  }
  if (absl::Status s = channel->Open(absl::HexStringToBytes(parts[2]), parts[1] == host_);
      !s.ok()) {
    channel->Fail(s, /*tell_peer=*/false, /*notify=*/false);
    return channel;
  }
  channel->nonce = RandomNonce();
  channel->SendControl(UcxControl::kChallenge, Payload({config_.world_id, channel->nonce}));
  if (auto it = early_challenges_.find(peer.rank); it != early_challenges_.end()) {
    AnswerChallenge(*channel, it->second);
    early_challenges_.erase(it);
  }
  return channel;
}

absl::StatusOr<std::vector<std::shared_ptr<Channel>>> UcxTransport::ConnectAll(
    int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) {
  rank_ = rank;
  int size = rank + 1;
  for (const PeerAddress& peer : peers) size = std::max(size, peer.rank + 1);
  std::vector<std::shared_ptr<UcxChannel>> opened;
  worker_->RunAndWait([&] {
    for (const PeerAddress& peer : peers) {
      if (peer.rank != rank) opened.push_back(AddChannel(peer));
    }
  });
  std::vector<std::shared_ptr<Channel>> channels(size);
  std::vector<std::string> failed;
  for (const auto& channel : opened) {
    channels[channel->peer_rank()] = channel;
    if (absl::Status s = channel->ready()->Wait(deadline); !s.ok()) {
      failed.push_back(absl::IsDeadlineExceeded(s) && !absl::StrContains(s.message(), ":")
                           ? absl::StrCat(channel->peer_description(), ": no handshake in time")
                           : std::string(s.message()));
    }
  }
  if (!failed.empty()) {
    return absl::UnavailableError(
        absl::StrFormat("rank %d (UCX) could not connect to %d peer(s): %s", rank, failed.size(),
                        absl::StrJoin(failed, "; ")));
  }
  return channels;
}

std::vector<std::shared_ptr<Channel>> UcxTransport::ExpectPeers(
    const std::vector<PeerAddress>& peers) {
  std::vector<std::shared_ptr<Channel>> channels;
  worker_->RunAndWait([&] {
    for (const PeerAddress& peer : peers) channels.push_back(AddChannel(peer));
  });
  return channels;
}

void UcxTransport::AnswerChallenge(UcxChannel& channel, std::span<const uint8_t> payload) {
  WireReader r(payload);
  const std::string world = r.GetString();
  const std::string nonce = r.GetString();
  if (!r.done() || world != config_.world_id) {
    const std::string reason =
        !r.done() ? "a malformed challenge"
                  : absl::StrFormat("world '%s', this rank's is '%s'", world, config_.world_id);
    channel.SendControl(UcxControl::kRefuse, Payload({reason}));
    channel.Fail(channel.Error(absl::StrCat("refused its handshake: ", reason)),
                 /*tell_peer=*/false, /*notify=*/false);
    return;
  }
  WireWriter hello;
  hello.PutString(config_.world_id);
  hello.Put<int32_t>(rank_);
  hello.Put<int32_t>(channel.peer_rank());
  hello.Put<uint32_t>(config_.epoch);
  hello.PutString(HelloProof(config_.token, config_.world_id, rank_, channel.peer_rank(),
                             config_.epoch, nonce));
  channel.SendControl(UcxControl::kHello, hello.bytes());
  channel.hello_sent = true;
}

void UcxTransport::CheckHello(UcxChannel& channel, std::span<const uint8_t> payload) {
  WireReader r(payload);
  const std::string world = r.GetString();
  const int32_t rank = r.Get<int32_t>();
  const int32_t to_rank = r.Get<int32_t>();
  const uint32_t epoch = r.Get<uint32_t>();
  const std::string proof = r.GetString();
  std::string reason;
  if (!r.done()) {
    reason = "a malformed hello";
  } else if (world != config_.world_id || rank != channel.peer_rank() || to_rank != rank_) {
    reason = absl::StrFormat("world '%s' rank %d to rank %d, expected world '%s' rank %d to %d",
                             world, rank, to_rank, config_.world_id, channel.peer_rank(), rank_);
  } else if (epoch != config_.epoch) {
    reason = absl::StrFormat("mismatched settings: peer has epoch %d, this rank epoch %d", epoch,
                             config_.epoch);
  } else if (!ProofsEqual(proof,
                          HelloProof(config_.token, world, rank, to_rank, epoch, channel.nonce))) {
    reason = "wrong token (the hello's proof does not match)";
  }
  if (!reason.empty()) {
    Logf("ucx", "rank %d: refused the hello of %s: %s", rank_, channel.peer_description(), reason);
    channel.SendControl(UcxControl::kRefuse, Payload({reason}));
    channel.Fail(channel.Error(absl::StrCat("refused its handshake: ", reason)),
                 /*tell_peer=*/false, /*notify=*/false);
    return;
  }
  channel.peer_proven = true;
  channel.SendControl(UcxControl::kAccept, {});
  if (channel.peer_accepted) channel.OnReady();
}

void UcxTransport::OnControl(int from, UcxControl type, std::span<const uint8_t> payload) {
  auto it = channels_.find(from);
  if (it == channels_.end()) {
    if (type == UcxControl::kChallenge && early_challenges_.size() < kMaxEarlyChallenges) {
      early_challenges_[from].assign(payload.begin(), payload.end());
    }
    return;
  }
  UcxChannel& channel = *it->second;
  if (channel.failed()) return;
  WireReader r(payload);
  switch (type) {
    case UcxControl::kChallenge:
      if (!channel.hello_sent) AnswerChallenge(channel, payload);
      return;
    case UcxControl::kHello:
      if (!channel.peer_proven) CheckHello(channel, payload);
      return;
    case UcxControl::kAccept:
      channel.peer_accepted = true;
      if (channel.peer_proven) channel.OnReady();
      return;
    case UcxControl::kRefuse:
      channel.Fail(channel.Error(absl::StrCat("refused this rank's handshake: ", r.GetString())),
                   /*tell_peer=*/false, /*notify=*/true);
      return;
    case UcxControl::kLeave:
      // Notices count only from a peer that proved the token.
      if (channel.peer_proven) {
        channel.Fail(channel.Error(absl::StrCat("closed the link: ", r.GetString())),
                     /*tell_peer=*/false, /*notify=*/true);
      }
      return;
    case UcxControl::kGoodbye:
      if (channel.peer_proven) channel.OnGoodbye();
      return;
  }
}

ucs_status_t UcxTransport::ControlArrived(void* arg, const void* header, size_t header_length,
                                          void* data, size_t length,
                                          const ucp_am_recv_param_t* param) {
  // Control messages are short: one sent by rendezvous is not hmc's, and is dropped.
  if (header_length != sizeof(UcxControlHeader) ||
      (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    return UCS_OK;
  }
  UcxControlHeader h;
  std::memcpy(&h, header, sizeof(h));
  static_cast<UcxTransport*>(arg)->OnControl(
      h.from, static_cast<UcxControl>(h.type),
      std::span<const uint8_t>(static_cast<const uint8_t*>(data), length));
  return UCS_OK;
}

ucs_status_t UcxTransport::DataArrived(void* arg, const void* header, size_t header_length,
                                       void* data, size_t length,
                                       const ucp_am_recv_param_t* param) {
  auto* transport = static_cast<UcxTransport*>(arg);
  if (header_length != sizeof(UcxDataHeader)) return UCS_OK;
  UcxDataHeader h;
  std::memcpy(&h, header, sizeof(h));
  auto it = transport->channels_.find(h.from);
  // Data from a rank that did not prove the token is dropped.
  if (it == transport->channels_.end() || !it->second->peer_proven) return UCS_OK;
  return it->second->OnData(h.tag, data, length,
                            (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0);
}

void UcxTransport::Shutdown(absl::Time deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  worker_->RunAndWait([&] {
    for (auto& [rank, channel] : channels_) {
      if (!channel->failed() && channel->peer_proven) {
        channel->SendControl(UcxControl::kGoodbye, {});
      }
    }
  });
  // Bounded by the deadline: polls until every peer said goodbye or its link failed.
  while (absl::Now() < deadline) {
    bool all = true;
    worker_->RunAndWait([&] {
      for (auto& [rank, channel] : channels_) {
        all = all && (channel->failed() || channel->got_goodbye() || !channel->peer_proven);
      }
    });
    if (all) break;
    absl::SleepFor(absl::Milliseconds(2));
  }
  std::vector<RequestPtr> closes;
  worker_->RunAndWait([&] {
    for (auto& [rank, channel] : channels_) {
      const bool clean = !channel->failed() && channel->got_goodbye();
      channel->Fail(channel->Error("the transport shut down"), /*tell_peer=*/false,
                    /*notify=*/false);
      closes.push_back(channel->CloseEndpoint(/*force=*/!clean));
    }
  });
  // A flushing close waits for the peer; one that cannot finish is forced by the worker's end.
  const absl::Time close_deadline = std::max(deadline, absl::Now()) + absl::Seconds(2);
  for (const RequestPtr& close : closes) close->Wait(close_deadline).IgnoreError();
}

}  // namespace hmc
