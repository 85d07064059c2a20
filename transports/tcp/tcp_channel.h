#ifndef HMC_TRANSPORTS_TCP_TCP_CHANNEL_H_
#define HMC_TRANSPORTS_TCP_TCP_CHANNEL_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/frame.h"
#include "core/frame_seal.h"
#include "core/mutex.h"
#include "core/socket.h"
#include "core/stream_io.h"
#include "transports/tcp/cma.h"
#include "transports/tcp/stream_adapter.h"
#include "transports/transport.h"

namespace hmc {

class TcpLoop;

struct TcpLimits {
  int streams = 4;
  // The receiver asks the sender for the stream count of each message-size class that its
  // messages arrive fastest with (StreamAdapter); a sender always follows such requests.
  bool adapt_streams = false;
  uint64_t stripe_min_bytes = 256 << 10;
  uint64_t max_frame_bytes = uint64_t{1} << 32;
  uint32_t epoch = 0;
  // Messages of at least this size to a peer on local sockets are pulled by the receiver from the
  // sender's memory (cross-memory attach) instead of streamed; 0 turns that off.
  uint64_t pull_min_bytes = 64 << 10;
  // A TCP stream takes the next stripe once its kernel buffer holds fewer unsent bytes than this
  // many milliseconds of its sending rate (TCP_NOTSENT_LOWAT; 0: the kernel's bound). Long enough
  // to cover the progress thread's wake-up; short, so that a stream its path slows holds little.
  int unsent_ms = 100;
  // A TCP connection whose sent data stays unacknowledged this long, or whose idle peer stops
  // answering keepalive probes for this long, fails (TCP_USER_TIMEOUT, SO_KEEPALIVE): a vanished
  // host or a link that silently drops everything. Zero: the kernel's defaults (minutes).
  absl::Duration liveness_timeout = absl::ZeroDuration();
  // What seals the frames of TCP streams that TLS does not protect.
  FrameIntegrity integrity = FrameIntegrity::kMac;
};

// How one stream is protected: the path of its bytes (TLS, or the socket as it is) and the seals
// of its frames (both directions' keys come from the stream's handshake).
struct StreamProtection {
  std::unique_ptr<StreamIo> io;  // Null: the socket as it is.
  FrameIntegrity integrity = FrameIntegrity::kOff;
  std::string send_key;
  std::string receive_key;
};

// One peer's link: `streams` TCP connections, with large messages striped across them. The
// public methods post work to the transport's progress thread; a send or receive made while that
// thread is idle runs on the caller's thread instead, holding the loop's turn
// (EventLoop::RunHereOrPost). So one thread at a time touches the sockets and the matching state
// (below, "progress thread" means whichever holds the turn), nothing here blocks, and nothing
// needs a lock but the status.
class TcpChannel final : public Channel,
                         public ParallelStreams,
                         public std::enable_shared_from_this<TcpChannel> {
 public:
  TcpChannel(int peer_rank, std::string description, const TcpLimits& limits, TcpLoop* loop);
  ~TcpChannel() override;

  int peer_rank() const override { return peer_rank_; }
  const std::string& peer_description() const override { return description_; }
  RequestPtr Send(uint64_t tag, const void* data, size_t bytes) override;
  RequestPtr SendEager(uint64_t tag, const void* data, size_t bytes) override;
  RequestPtr Recv(uint64_t tag, void* data, size_t bytes) override;
  RequestPtr RecvUpTo(uint64_t tag, void* data, size_t capacity) override;
  void Close(const absl::Status& why) override;
  absl::Status status() const override;
  LinkStats stats() const override;
  ParallelStreams* parallel_streams() override { return this; }
  int connections() const override { return limits_.streams; }
  int active_streams() const override { return active_streams_.load(std::memory_order_relaxed); }
  int streams_for(uint64_t bytes) const override;
  void SetActiveStreams(int streams) override;
  void SetStripeMinBytes(uint64_t bytes) override {
    stripe_min_bytes_.store(bytes, std::memory_order_relaxed);
  }
  bool local() const override { return local_streams_.load() == limits_.streams; }
  absl::Duration round_trip() const override {
    return absl::Microseconds(shortest_rtt_us_.load(std::memory_order_relaxed));
  }
  // Each stream a message is spread over gets an equal part of the rate (SO_MAX_PACING_RATE, the
  // kernel's own pacing), set when it next takes a stripe; Unix domain sockets are not paced.
  void SetPacingRate(uint64_t bytes_per_s) override {
    pacing_bytes_per_s_.store(bytes_per_s, std::memory_order_relaxed);
  }
  void DiscardTagsBelow(uint64_t floor, const absl::Status& why) override;

  // Progress thread only.
  // Whether stream `index` is free to attach.
  absl::Status CanAttach(int index) const;
  // `local`: a Unix domain socket to a peer on this host.
  absl::Status AttachStream(int index, UniqueFd fd, bool local, StreamProtection protection);
  bool connected() const { return attached_ == static_cast<int>(streams_.size()); }
  void OnEvent(int stream, uint32_t events);
  void Fail(const absl::Status& why, bool notify);
  void ResumePaused();
  // Graceful close: says goodbye on every stream once its queue is empty and shuts down writing.
  void BeginShutdown();
  bool shutdown_complete() const;

 private:
  // Their definitions: tcp_channel_parts.h, shared by the files that implement the channel
  // (tcp_channel*.cc: the API and streams; sending; receiving; the single-copy pull; control,
  // goodbye and failure).
  struct SendOp;
  struct OutFrame;
  struct Incoming;
  struct Stream;

  static constexpr size_t kMaxLeaveReasonBytes = 4096;
  static constexpr uint64_t kMaxControlOnDataStream = 8192;
  // The range of a stream's bound on unsent bytes: a floor for connections still opening their
  // window or just back from idle (whose window says little of the rate to come), a ceiling at the
  // kernel's default largest send buffer.
  static constexpr int kMinUnsentBytes = 64 << 10;
  static constexpr int kMaxUnsentBytes = 4 << 20;
  // Bytes one stream's read event takes before the others get their turn (what TLS already took
  // from the socket is read past it: the socket will not say again that it is there).
  static constexpr uint64_t kReadBudgetBytes = 16 << 20;
  // SO_MAX_PACING_RATE's value for no cap (the kernel's ~0U; the option takes 32 bits).
  static constexpr uint64_t kUnpaced = ~uint32_t{0};
  // A rendezvous answer: the receiver neither pulled the message nor wants it streamed, because the
  // call it belonged to was abandoned (DiscardTagsBelow). 0 and 1 mean streamed and pulled.
  static constexpr uint8_t kRendezvousDropped = 2;

  void CloseWithNotice(const absl::Status& why);
  void PeerClosed();
  // The connection of `s` broke: report `cause` unless a close notice explains it.
  void LinkLost(Stream& s, const std::string& cause, bool read_side_closed);
  RequestPtr PostSend(uint64_t tag, const void* data, size_t bytes, bool may_pull);
  void DoSend(uint64_t tag, const uint8_t* data, uint64_t bytes, bool may_pull, RequestPtr request);
  void SendStreamed(uint64_t tag, const uint8_t* data, uint64_t bytes, RequestPtr request);
  // Queues a small control frame (rendezvous, rendezvous-done) on the next stream.
  void SendControl(FrameType type, uint64_t tag, uint64_t total_bytes,
                   std::vector<uint8_t> payload);
  void OnControlFrame(Stream& s);
  // Pulls a rendezvous message into a posted receive; answers the sender either way.
  void Pull(uint64_t tag, const std::vector<uint8_t>& description);
  void DoDiscard(uint64_t floor, const absl::Status& why);
  bool Stale(uint64_t tag) const { return tag < discard_floor_; }
  // The request of a send or receive of `bytes` (TcpLoop::NewRequest).
  RequestPtr NewRequest(size_t bytes) const;
  RequestPtr PostRecv(uint64_t tag, void* data, size_t bytes, bool up_to);
  void DoRecv(uint64_t tag, uint8_t* data, uint64_t bytes, bool up_to, RequestPtr request);
  // Whether `in` takes a message of `sent` bytes; fixes an up-to receive's length if so, fails
  // the channel naming both lengths if not.
  bool AcceptLength(Incoming& in, uint64_t tag, uint64_t sent);
  // Sets the stream's part of the channel's pacing rate (shared by `spread` streams) where it
  // changed.
  void Pace(Stream& s, int spread);
  // Sets the stream's TCP_NOTSENT_LOWAT from its current window and round trip.
  void BoundUnsent(Stream& s);
  // Whether `s` has handed everything to the kernel and may take an unassigned stripe.
  bool WantsStripe(const Stream& s) const;
  // Gives `s` the next unassigned stripe if it has nothing left to write; false if it did not.
  bool TakeStripe(Stream& s);
  // Runs the stream's TLS handshake on; true once data may flow.
  bool Ready(Stream& s);
  // Seals `f` as the next frame of `s`: from then on it must go out, in this order.
  void Seal(Stream& s, OutFrame& f);
  // Writes a last notice on `s` at once (CloseWithNotice), sealed like any frame.
  void WriteNotice(Stream& s, const std::vector<uint8_t>& frame);
  void Write(Stream& s);
  void Read(Stream& s);
  // Read's steps. A header: read on (kAgain: part of it), stop (the socket has no more, or the
  // stream ended or failed) or go on to its payload (kPayload), whose destination BeginPayload
  // found (false: the stream pauses, or the channel failed). ReadPayload reads what the budget
  // allows; false where Read must stop.
  enum class ReadStep { kAgain, kStop, kPayload };
  ReadStep ReadHeader(Stream& s);
  bool BeginPayload(Stream& s);
  bool ReadPayload(Stream& s, uint64_t& budget);
  // Reads the trailer of the stream's current frame and checks it; false if it has not all
  // arrived yet or the check failed (then the channel failed).
  bool ReadTrailer(Stream& s);
  // Finds where the payload of the stream's current header goes; false if the stream must pause.
  bool Route(Stream& s);
  void FinishStripe(Stream& s);
  // Tells the peer that this side stopped (`held`) or resumed reading `s`, where that changed: a
  // stream paused until a receive is posted may stay unread for longer than the liveness timeout
  // (a slower peer still computing), and Linux fails a connection whose receiver advertises a
  // zero window that long, as if the receiver had vanished. The sender stops the stream's
  // TCP_USER_TIMEOUT while it is held (its keepalives, the coordinator's heartbeats and the other
  // streams still notice a vanished host) and restores it on release.
  void TellHold(Stream& s, bool held);
  // Fails the channel over the stream's control frame, naming `what` and the frame's payload.
  void FailOnControl(const Stream& s, absl::string_view what);
  void Complete(uint64_t tag);
  void UpdateInterest(Stream& s);
  void Unwatch(Stream& s);
  absl::Status Error(absl::string_view what) const;

  const int peer_rank_;
  const std::string description_;
  const TcpLimits limits_;
  TcpLoop* const loop_;

  // Progress-thread state.
  std::vector<std::unique_ptr<Stream>> streams_;
  int attached_ = 0;
  size_t next_stream_ = 0;  // Where the next control frame goes.
  // Data stripes no stream has taken yet. A stream takes the next one only once it has handed all
  // of its own to the kernel, so the streams TCP serves faster carry more: fixed shares made every
  // message wait for the slowest of them (a stream recovering from a loss, or stalled).
  std::deque<OutFrame> unassigned_;
  std::map<uint64_t, std::unique_ptr<Incoming>> incoming_;
  // Rendezvous sends waiting for the receiver's answer, and rendezvous offers not yet received.
  struct PullSend {
    std::shared_ptr<SendOp> op;
    const uint8_t* data;
    uint64_t bytes;
    std::unique_ptr<PullRegistration> registration;  // Read by the peer until it answers.
  };
  std::map<uint64_t, PullSend> pull_sends_;
  std::map<uint64_t, std::pair<uint64_t, std::vector<uint8_t>>>
      pull_offers_;                          // tag -> (bytes, description)
  std::atomic<int> local_streams_{0};        // Written by the progress thread only.
  std::atomic<int64_t> shortest_rtt_us_{0};  // Written by the progress thread only; 0: none yet.
  std::atomic<int> active_streams_;
  // What the receiver asked for, per size class (0: active_streams_).
  std::array<std::atomic<int>, kSizeClasses> class_streams_{};
  std::optional<StreamAdapter> adapter_;  // Of the messages received; with adapt_streams.
  std::atomic<uint64_t> stripe_min_bytes_;
  std::atomic<uint64_t> pacing_bytes_per_s_{0};  // 0: unpaced.
  bool pull_refused_ = false;  // The peer could not read this process's memory once.
  // The process at the other end of the local streams (SO_PEERCRED): what pulls read. Unknown
  // when the kernel did not say, or when streams disagree.
  std::optional<PeerProcess> peer_process_;
  bool peer_process_unknown_ = false;
  uint64_t discard_floor_ = 0;  // Tags below it are abandoned (DiscardTagsBelow).
  absl::Status discard_why_;
  std::vector<uint8_t> discard_sink_;  // Where dropped payloads are read to.
  bool failed_ = false;
  bool shutting_down_ = false;
  bool draining_ = false;
  bool peer_closed_ = false;  // Goodbye and end of stream on every stream.
  bool logged_protection_ = false;

  mutable Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  LinkCounters counters_;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_TCP_CHANNEL_H_
