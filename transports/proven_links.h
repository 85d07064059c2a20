#ifndef HMC_TRANSPORTS_PROVEN_LINKS_H_
#define HMC_TRANSPORTS_PROVEN_LINKS_H_

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/auth.h"
#include "core/log.h"
#include "core/mutex.h"
#include "transports/peer_handshake.h"
#include "transports/progress_thread.h"
#include "transports/transport.h"

namespace hmc {

// The links of a transport whose channels prove the token over their own control messages
// (peer_handshake.h) and whose library is driven by one ProgressThread (UCX, libfabric): the
// channel table, challenges that come before their rank is expected, connecting, the failure
// callback and the goodbye at shutdown. `Link` is the transport's channel (see
// OnControlMessage for what it offers; also ready(), got_goodbye()).
template <typename Link>
class ProvenLinks {
 public:
  // Makes a link to `peer` and opens it (creating its endpoint, inserting its address); an error
  // fails the link, which ConnectAll reports.
  using Opener = std::function<absl::Status(Link& link, const PeerAddress& peer)>;
  using Maker = std::function<std::shared_ptr<Link>(
      const PeerAddress& peer, std::function<void(int, const absl::Status&)> on_failure)>;

  ProvenLinks(HandshakeSettings settings, std::string name, ProgressThread* thread, Maker make,
              Opener open)
      : settings_(std::move(settings)),
        name_(std::move(name)),
        thread_(thread),
        make_(std::move(make)),
        open_(std::move(open)) {}

  int rank() const { return rank_; }

  void SetFailureCallback(Transport::FailureCallback callback) {
    MutexLock lock(&mu_);
    failure_callback_ = std::move(callback);
  }

  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> ConnectAll(
      int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) {
    rank_ = rank;
    int size = rank + 1;
    for (const PeerAddress& peer : peers) size = std::max(size, peer.rank + 1);
    std::vector<std::shared_ptr<Link>> opened;
    thread_->RunAndWait([&] {
      for (const PeerAddress& peer : peers) {
        if (peer.rank != rank) opened.push_back(Add(peer));
      }
    });
    std::vector<std::shared_ptr<Channel>> channels(size);
    std::vector<std::string> failed;
    for (const auto& link : opened) {
      channels[link->peer_rank()] = link;
      if (absl::Status s = link->ready()->Wait(deadline); !s.ok()) {
        failed.push_back(absl::IsDeadlineExceeded(s) && !absl::StrContains(s.message(), ":")
                             ? absl::StrCat(link->peer_description(), ": no handshake in time")
                             : std::string(s.message()));
      }
    }
    if (!failed.empty()) {
      return absl::UnavailableError(
          absl::StrFormat("rank %d (%s) could not connect to %d peer(s): %s", rank, name_,
                          failed.size(), absl::StrJoin(failed, "; ")));
    }
    return channels;
  }

  std::vector<std::shared_ptr<Channel>> ExpectPeers(const std::vector<PeerAddress>& peers) {
    std::vector<std::shared_ptr<Channel>> channels;
    thread_->RunAndWait([&] {
      for (const PeerAddress& peer : peers) channels.push_back(Add(peer));
    });
    return channels;
  }

  // On the progress thread: a control message from rank `from`.
  void OnControl(int from, ControlMessage type, std::span<const uint8_t> payload) {
    auto it = links_.find(from);
    if (it == links_.end()) {
      if (type == ControlMessage::kChallenge && early_challenges_.size() < kMaxEarlyChallenges) {
        early_challenges_[from].assign(payload.begin(), payload.end());
      }
      return;
    }
    OnControlMessage(settings_, rank_, *it->second, type, payload);
  }

  // On the progress thread: the link to `from` where it proved the token, else null.
  Link* Proven(int from) const {
    auto it = links_.find(from);
    return it != links_.end() && it->second->peer_proven ? it->second.get() : nullptr;
  }

  // What a shutdown found: OK when every proven peer said goodbye (or its link failed) by the
  // deadline, else DeadlineExceeded naming the others; and what each link's `close` returned, for
  // the caller to wait on.
  struct ShutdownOutcome {
    absl::Status goodbyes;
    std::vector<RequestPtr> closes;
  };

  // Says goodbye on every link that has not yet, waits (until the deadline) for the peers'
  // goodbyes or their links' failure, then fails every link and runs `close` on it (on the
  // progress thread).
  ShutdownOutcome Shutdown(absl::Time deadline,
                           const std::function<RequestPtr(Link&, bool clean)>& close) {
    thread_->RunAndWait([&] {
      for (auto& [rank, link] : links_) {
        if (!link->failed() && link->peer_proven) SayGoodbyeOnce(*link);
      }
    });
    // Bounded by the deadline: polls until every peer said goodbye or its link failed.
    std::vector<std::string> silent = SilentPeers();
    while (!silent.empty() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
      silent = SilentPeers();
    }
    ShutdownOutcome outcome;
    outcome.goodbyes = MissingGoodbyes(silent);
    thread_->RunAndWait([&] {
      for (auto& [rank, link] : links_) {
        const bool clean = !link->failed() && link->got_goodbye();
        link->Fail(link->Error("the transport shut down"), /*tell_peer=*/false,
                   /*notify=*/false);
        outcome.closes.push_back(close(*link, clean));
      }
    });
    return outcome;
  }

  // Drops every link (on the progress thread); the transport's end.
  void Clear() {
    thread_->RunAndWait([&] { links_.clear(); });
  }

 private:
  static constexpr size_t kMaxEarlyChallenges = 4096;

  std::shared_ptr<Link> Add(const PeerAddress& peer) {
    std::shared_ptr<Link> link =
        make_(peer, [this](int rank, const absl::Status& why) { OnLinkFailed(rank, why); });
    links_[peer.rank] = link;
    if (absl::Status s = open_(*link, peer); !s.ok()) {
      link->Fail(s, /*tell_peer=*/false, /*notify=*/false);
      return link;
    }
    link->nonce = RandomNonce();
    link->SendControl(ControlMessage::kChallenge,
                      StringsPayload({settings_.world_id, link->nonce}));
    if (auto it = early_challenges_.find(peer.rank); it != early_challenges_.end()) {
      OnControlMessage(settings_, rank_, *link, ControlMessage::kChallenge, it->second);
      early_challenges_.erase(it);
    }
    return link;
  }

  // The proven peers whose links stand and who have not said goodbye.
  std::vector<std::string> SilentPeers() {
    std::vector<std::string> silent;
    thread_->RunAndWait([&] {
      for (auto& [rank, link] : links_) {
        if (!link->failed() && !link->got_goodbye() && link->peer_proven) {
          silent.push_back(link->peer_description());
        }
      }
    });
    return silent;
  }

  void OnLinkFailed(int rank, const absl::Status& why) {
    Logf("transport", "rank %d: %s link to rank %d failed: %s", rank_, name_, rank, why.message());
    Transport::FailureCallback callback;
    {
      MutexLock lock(&mu_);
      callback = failure_callback_;
    }
    if (callback) callback(rank, why);
  }

  const HandshakeSettings settings_;
  const std::string name_;  // For messages: "UCX", "libfabric".
  ProgressThread* const thread_;
  const Maker make_;
  const Opener open_;
  int rank_ = -1;
  // Progress thread only.
  std::map<int, std::shared_ptr<Link>> links_;
  std::map<int, std::vector<uint8_t>> early_challenges_;

  Mutex mu_;
  Transport::FailureCallback failure_callback_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_PROVEN_LINKS_H_
