#include "transports/inproc/inproc_transport.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace hmc {

class InprocChannel final : public Channel {
 public:
  InprocChannel(std::shared_ptr<InprocFabric> fabric, int self, int peer)
      : fabric_(std::move(fabric)), self_(self), peer_(peer), description_(Describe(peer)) {}

  int peer_rank() const override { return peer_; }
  const std::string& peer_description() const override { return description_; }

  RequestPtr Send(uint64_t tag, const void* data, size_t bytes) override {
    MutexLock lock(&fabric_->mu_);
    if (absl::Status s = BrokenLocked(); !s.ok()) return CompletedRequest(s);
    if (absl::Status s = StaleLocked(self_, peer_, tag); !s.ok()) return CompletedRequest(s);
    if (!StaleLocked(peer_, self_, tag).ok())
      return CompletedRequest(absl::OkStatus());  // Dropped.
    const InprocFabric::Key key{self_, peer_, tag};
    LinkStats& sent = fabric_->stats_[{self_, peer_}];
    sent.bytes_sent += bytes;
    ++sent.messages_sent;
    if (auto it = fabric_->receives_.find(key); it != fabric_->receives_.end()) {
      InprocFabric::PostedRecv recv = it->second;
      fabric_->receives_.erase(it);
      if (!Fits(bytes, recv.bytes, recv.up_to)) {
        // The receiver's channel fails, as a transport's would on reading the length.
        FailLocked(peer_, self_, SizeMismatch(self_, tag, bytes, recv.bytes, recv.up_to));
        recv.request->Complete(fabric_->broken_.at({peer_, self_}));
      } else {
        if (bytes > 0) std::memcpy(recv.data, data, bytes);
        Delivered(peer_, self_, bytes);
        recv.request->Complete(absl::OkStatus(), bytes);
      }
    } else {
      const auto* p = static_cast<const uint8_t*>(data);
      fabric_->messages_[key] = std::vector<uint8_t>(p, p + bytes);
    }
    return CompletedRequest(absl::OkStatus());
  }

  RequestPtr Recv(uint64_t tag, void* data, size_t bytes) override {
    return PostRecv(tag, data, bytes, /*up_to=*/false);
  }
  RequestPtr RecvUpTo(uint64_t tag, void* data, size_t capacity) override {
    return PostRecv(tag, data, capacity, /*up_to=*/true);
  }

  // The peer learns why too, as over a transport that sends the reason before closing.
  void Close(const absl::Status& why) override {
    MutexLock lock(&fabric_->mu_);
    FailLocked(self_, peer_, why);
    FailLocked(peer_, self_, why);
  }

  absl::Status status() const override {
    MutexLock lock(&fabric_->mu_);
    return BrokenLocked();
  }

  LinkStats stats() const override {
    MutexLock lock(&fabric_->mu_);
    auto it = fabric_->stats_.find({self_, peer_});
    return it != fabric_->stats_.end() ? it->second : LinkStats{};
  }

  void DiscardTagsBelow(uint64_t floor, const absl::Status& why) override {
    MutexLock lock(&fabric_->mu_);
    auto& [current, reason] = fabric_->floors_[{self_, peer_}];
    if (floor <= current) return;
    current = floor;
    reason = why;
    for (auto it = fabric_->receives_.begin(); it != fabric_->receives_.end();) {
      const auto& [from, to, tag] = it->first;
      if (from == peer_ && to == self_ && tag < floor) {
        it->second.request->Complete(why);
        it = fabric_->receives_.erase(it);
      } else {
        ++it;
      }
    }
    std::erase_if(fabric_->messages_, [&](const auto& entry) {
      const auto& [from, to, tag] = entry.first;
      return from == peer_ && to == self_ && tag < floor;
    });
  }

 private:
  RequestPtr PostRecv(uint64_t tag, void* data, size_t bytes, bool up_to) {
    MutexLock lock(&fabric_->mu_);
    if (absl::Status s = BrokenLocked(); !s.ok()) return CompletedRequest(s);
    if (absl::Status s = StaleLocked(self_, peer_, tag); !s.ok()) return CompletedRequest(s);
    const InprocFabric::Key key{peer_, self_, tag};
    if (auto it = fabric_->messages_.find(key); it != fabric_->messages_.end()) {
      std::vector<uint8_t> message = std::move(it->second);
      fabric_->messages_.erase(it);
      if (!Fits(message.size(), bytes, up_to)) {
        FailLocked(self_, peer_, SizeMismatch(peer_, tag, message.size(), bytes, up_to));
        return CompletedRequest(BrokenLocked());
      }
      if (!message.empty()) std::memcpy(data, message.data(), message.size());
      Delivered(self_, peer_, message.size());
      auto request = std::make_shared<Request>();
      request->Complete(absl::OkStatus(), message.size());
      return request;
    }
    auto request = std::make_shared<Request>();
    fabric_->receives_[key] = InprocFabric::PostedRecv{data, bytes, up_to, request};
    return request;
  }

  // Counts a message that `receiver` took from `sender`.
  void Delivered(int receiver, int sender, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(fabric_->mu_) {
    LinkStats& stats = fabric_->stats_[{receiver, sender}];
    stats.bytes_received += bytes;
    ++stats.messages_received;
  }
  // Fails the channel of `self` to `peer` (the first reason stays) and its pending receives.
  void FailLocked(int self, int peer, const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(fabric_->mu_) {
    const absl::Status& reason = fabric_->broken_.try_emplace({self, peer}, why).first->second;
    for (auto it = fabric_->receives_.begin(); it != fabric_->receives_.end();) {
      if (std::get<0>(it->first) == peer && std::get<1>(it->first) == self) {
        it->second.request->Complete(reason);
        it = fabric_->receives_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Why `receiver` abandoned `tag` from `sender`; OK if it did not.
  absl::Status StaleLocked(int receiver, int sender, uint64_t tag) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(fabric_->mu_) {
    auto it = fabric_->floors_.find({receiver, sender});
    if (it == fabric_->floors_.end() || tag >= it->second.first) return absl::OkStatus();
    return it->second.second;
  }
  static bool Fits(size_t sent, size_t posted, bool up_to) {
    return up_to ? sent <= posted : sent == posted;
  }
  absl::Status BrokenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(fabric_->mu_) {
    if (auto it = fabric_->broken_.find({self_, peer_}); it != fabric_->broken_.end()) {
      return it->second;
    }
    for (int rank : {self_, peer_}) {
      if (auto it = fabric_->killed_.find(rank); it != fabric_->killed_.end()) return it->second;
    }
    return absl::OkStatus();
  }
  // As the receiver's channel words it (its peer's description first, as every channel error).
  static absl::Status SizeMismatch(int sender, uint64_t tag, size_t sent, size_t expected,
                                   bool up_to) {
    return absl::UnavailableError(absl::StrFormat(
        "%s: message size mismatch for tag %#x: the peer sent %d bytes, the receive expects %s%d",
        Describe(sender), tag, sent, up_to ? "at most " : "", expected));
  }
  static std::string Describe(int rank) { return absl::StrFormat("rank %d (inproc)", rank); }

  std::shared_ptr<InprocFabric> fabric_;
  const int self_;
  const int peer_;
  const std::string description_;
};

void InprocFabric::Kill(int rank, const absl::Status& why) {
  MutexLock lock(&mu_);
  for (auto it = receives_.begin(); it != receives_.end();) {
    if (std::get<0>(it->first) == rank || std::get<1>(it->first) == rank) {
      it->second.request->Complete(why);
      it = receives_.erase(it);
    } else {
      ++it;
    }
  }
  killed_.try_emplace(rank, why);
}

InprocTransport::InprocTransport(std::shared_ptr<InprocFabric> fabric, int rank)
    : fabric_(std::move(fabric)), rank_(rank) {}

std::string InprocTransport::address() const { return absl::StrFormat("inproc:%d", rank_); }

absl::StatusOr<std::vector<std::shared_ptr<Channel>>> InprocTransport::ConnectAll(
    int rank, const std::vector<PeerAddress>& peers, absl::Time) {
  std::vector<std::shared_ptr<Channel>> channels(peers.size());
  for (const PeerAddress& p : peers) {
    if (p.rank != rank) channels[p.rank] = std::make_shared<InprocChannel>(fabric_, rank, p.rank);
  }
  return channels;
}

std::vector<std::shared_ptr<Channel>> InprocTransport::ExpectPeers(
    const std::vector<PeerAddress>& peers) {
  std::vector<std::shared_ptr<Channel>> channels;
  for (const PeerAddress& p : peers) {
    channels.push_back(std::make_shared<InprocChannel>(fabric_, rank_, p.rank));
  }
  return channels;
}

}  // namespace hmc
