#ifndef HMC_TRANSPORTS_TRANSPORT_H_
#define HMC_TRANSPORTS_TRANSPORT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "transports/request.h"

namespace hmc {

// Bytes and messages that crossed one link, in each direction.
struct LinkStats {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
};

// What a channel counts for its stats(): added on its progress thread, read from any thread.
// Bytes and messages apart, since a striped message's bytes arrive before it completes.
class LinkCounters {
 public:
  void AddSent(uint64_t bytes, uint64_t messages) {
    bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
    messages_sent_.fetch_add(messages, std::memory_order_relaxed);
  }
  void AddReceived(uint64_t bytes, uint64_t messages) {
    bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
    messages_received_.fetch_add(messages, std::memory_order_relaxed);
  }
  LinkStats Read() const {
    return LinkStats{bytes_sent_.load(), bytes_received_.load(), messages_sent_.load(),
                     messages_received_.load()};
  }

 private:
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, messages_sent_{0},
      messages_received_{0};
};

// A link made of several parallel connections to one peer, as TCP's streams are, and how many of
// them sends spread over: the sender's choice alone, since a receiver takes stripes from any
// connection. Every method may be called from any thread.
class ParallelStreams {
 public:
  virtual ~ParallelStreams() = default;
  // The connections opened to the peer.
  virtual int connections() const = 0;
  // How many of them sends spread over now.
  virtual int active_streams() const = 0;
  // The connections a message of `bytes` is spread over now: active_streams, or what the receiver
  // asked for messages of its size where the transport adapts (TcpLimits::adapt_streams).
  virtual int streams_for(uint64_t bytes) const = 0;
  virtual void SetActiveStreams(int streams) = 0;
  // Messages shorter than this go on one connection. A long link wants it low: a message on one
  // connection is held to that connection's window per round trip.
  virtual void SetStripeMinBytes(uint64_t bytes) = 0;
};

// A link to one peer. Messages are matched by tag: a receive completes with the message the peer
// sent under the same tag, whichever order they were posted in, and its length must equal the
// receive's length, or for RecvUpTo be at most its capacity (a mismatch fails the channel, naming
// the peer and both lengths). At most one
// send and one receive per tag may be pending at a time. The caller keeps the memory of a pending
// request alive until it completes. Every method may be called from any thread.
class Channel {
 public:
  virtual ~Channel() = default;
  virtual int peer_rank() const = 0;
  // "rank 2 (host, 10.0.0.2:4000)", for messages.
  virtual const std::string& peer_description() const = 0;
  virtual RequestPtr Send(uint64_t tag, const void* data, size_t bytes) = 0;
  // As Send, for a latency-bound message: its bytes travel eagerly, never by a rendezvous that
  // the receiver answers (TCP's pulls from local peers), whose round trip the copy it saves does
  // not repay at tens of KiB. The argument check's messages, with the early data that rides in
  // them, go this way. A transport without a rendezvous of its own sends it as Send does.
  virtual RequestPtr SendEager(uint64_t tag, const void* data, size_t bytes) {
    return Send(tag, data, bytes);
  }
  virtual RequestPtr Recv(uint64_t tag, void* data, size_t bytes) = 0;
  // Takes a message of any length up to `capacity`; the request's bytes() says how long it was.
  // For messages whose length only the sender knows, such as compressed ones.
  virtual RequestPtr RecvUpTo(uint64_t tag, void* data, size_t capacity) = 0;
  // Fails every pending and later request on this channel with `why`, and tells the peer `why`
  // where the transport can, so that it reports the original cause.
  virtual void Close(const absl::Status& why) = 0;
  // OK while the channel works; the reason it failed afterwards.
  virtual absl::Status status() const = 0;
  virtual LinkStats stats() const = 0;
  // The link's parallel connections, where the transport has them (TCP's streams); null
  // otherwise. What the stream choice steers (collectives/stream_probe.h).
  virtual ParallelStreams* parallel_streams() { return nullptr; }
  // Whether the peer shares this host's network namespace (a link without a network path).
  virtual bool local() const { return false; }
  // The shortest round trip the kernel measured on the link's connections (from their handshakes
  // on: TCP's smoothed RTT); zero while unknown, and for transports that do not measure it.
  virtual absl::Duration round_trip() const { return absl::ZeroDuration(); }
  // Caps the rate at which this link's sends leave, bytes/s over all of its connections; 0 lifts
  // the cap. An algorithm that sends on several links at once shares its NIC among them with it
  // (CollectiveContext::PaceSends). Transports that cannot pace ignore it.
  virtual void SetPacingRate(uint64_t bytes_per_s) { (void)bytes_per_s; }
  // Messages whose tags are below `floor` belong to calls that were abandoned (a membership epoch
  // that ended): their pending requests fail with `why` (a send once the transport no longer reads
  // its memory), messages of theirs that arrived are dropped, and later ones are read and dropped,
  // so that they neither match a later receive nor hold memory. The floor only rises.
  virtual void DiscardTagsBelow(uint64_t floor, const absl::Status& why) = 0;
};

// The connections a link's sends spread over now: 1 where it has no parallel streams.
inline int ActiveStreams(Channel& channel) {
  ParallelStreams* streams = channel.parallel_streams();
  return streams != nullptr ? streams->active_streams() : 1;
}

struct PeerAddress {
  int rank;
  std::string address;
  std::string description;
  std::string zone;  // Which class of link reaches it (PerLinkTransport); empty: unknown.
};

// Creates channels to peers from the addresses the coordinator hands out.
class Transport {
 public:
  using FailureCallback = std::function<void(int rank, const absl::Status& why)>;

  virtual ~Transport() = default;
  // The address peers reach this rank at, as published through the coordinator.
  virtual std::string address() const = 0;
  // Connects to every peer (entries for every rank including this one; this rank's is skipped;
  // ranks not listed, such as members that left, get no channel) and returns the channels
  // indexed by rank (null at this rank and unlisted ones), or an error naming the peers that did
  // not connect before the deadline.
  virtual absl::StatusOr<std::vector<std::shared_ptr<Channel>>> ConnectAll(
      int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) = 0;
  // Channels to ranks that join after ConnectAll (stable ids above every rank connected so far):
  // they connect here, as the higher rank of each pair does. A stream that arrives before its
  // rank is expected waits for this call. Returns the channels in the order of `peers`.
  virtual std::vector<std::shared_ptr<Channel>> ExpectPeers(
      const std::vector<PeerAddress>& peers) = 0;
  // Called from the transport's thread when a channel fails (once per channel).
  virtual void SetFailureCallback(FailureCallback callback) = 0;
  // Closes every channel gracefully: what is in flight is delivered and each side says goodbye,
  // waiting at most until the deadline. A peer that stays answers with its own goodbye as soon as
  // it has read this side's. DeadlineExceeded names the peers that had not answered by then.
  virtual absl::Status Shutdown(absl::Time deadline) = 0;
};

// What Shutdown returns where the peers in `silent` (their descriptions) had not said goodbye by
// its deadline: OK when there are none.
inline absl::Status MissingGoodbyes(const std::vector<std::string>& silent) {
  if (silent.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("no goodbye before the deadline from ", absl::StrJoin(silent, ", ")));
}

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TRANSPORT_H_
