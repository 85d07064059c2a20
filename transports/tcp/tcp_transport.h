#ifndef HMC_TRANSPORTS_TCP_TCP_TRANSPORT_H_
#define HMC_TRANSPORTS_TCP_TCP_TRANSPORT_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/accept_gate.h"
#include "core/event_loop.h"
#include "core/frame_io.h"
#include "core/mutex.h"
#include "core/rejection_log.h"
#include "core/socket.h"
#include "core/tls.h"
#include "transports/tcp/handshake.h"
#include "transports/tcp/tcp_channel.h"
#include "transports/tcp/tcp_loop.h"
#include "transports/transport.h"

namespace hmc {

struct TcpTransportConfig {
  std::string bind = "127.0.0.1:0";  // Port 0: any free port.
  std::string token;
  bool insecure = false;  // Allow an empty token (RequireToken).
  std::string world_id = "hmc";
  int64_t socket_buffer_bytes = 0;
  std::string tcp_congestion;  // Empty: the host's default.
  uint64_t max_unexpected_bytes = 256 << 20;
  absl::Duration handshake_timeout = absl::Seconds(10);
  // Also listen on a Unix domain socket in the abstract namespace; peers that share this network
  // namespace (the same host, outside any emulator) connect there: about twice TCP loopback's
  // throughput, same framing and handshake.
  bool local_sockets = true;
  // A thread that waits for this transport's sends and receives of messages below the striping
  // size handles the sockets' events itself where no other thread does (EventLoop::Drive),
  // instead of sleeping until the progress thread has: one thread hand-off per message fewer.
  bool waiters_poll = true;
  // How long such a waiter spins before it sleeps (EventLoop::SetWaiterSpin), µs; -1: chosen once
  // connected (WaiterSpinFor), as is whether it yields its core, from the ranks on this host: the
  // launcher's count, or this rank and its peers on local sockets where they are more (ranks in
  // other network namespaces of the host, as the WAN emulator's, are only in the launcher's
  // count).
  int64_t waiter_spin_us = -1;
  int ranks_on_host = 1;
  // TLS on TCP streams (never on local sockets); where it is off, frames carry
  // `limits.integrity`'s seal instead.
  TlsConfig tls;
  TcpLimits limits;
};

// How a polling waiter spins before it sleeps. Where the ranks on the host (the launcher's count,
// or this rank and its `local_peers` where they are more) are no more than its `cpus`, each may
// keep one busy: 50 µs. Where they are more, a spinning rank would hold the core that the rank it
// waits for needs to send, so it yields the core after each empty poll, 100 µs long: the rank it
// waits for runs at once, without the wake-up a sleep would cost it (4 ranks on 2 cores, 1 KiB:
// 0.67× the time of no spin), after a short wait only (EventLoop::WaitForReady).
// `config.waiter_spin_us`, where set, is the spin's length.
EventLoop::Spin WaiterSpinFor(const TcpTransportConfig& config, int local_peers, int cpus);

// Channels must not be used after their transport is destroyed.
//
// Multi-stream TCP: one progress thread runs epoll over the listener, handshakes in progress and
// every stream; other threads post work to it, or run it themselves where it is idle
// (EventLoop::RunHereOrPost), and a thread that waits for a request may poll in its stead
// (`waiters_poll`). The higher rank of a pair connects, with
// `streams` connections that each prove the token (HMAC challenge-response). Inbound connections
// that fail the handshake (wrong token, garbage, truncation, oversized lengths, silence) are
// answered with an error, logged with their address and closed; the listener keeps serving.
class TcpTransport final : public Transport, private TcpLoop {
 public:
  static absl::StatusOr<std::unique_ptr<TcpTransport>> Create(const TcpTransportConfig& config);
  ~TcpTransport() override;

  // "HOST:PORT", followed by " local:NAME" when a local socket listens too.
  std::string address() const override { return published_; }
  std::string tcp_address() const { return address_.ToString(); }
  absl::StatusOr<std::vector<std::shared_ptr<Channel>>> ConnectAll(
      int rank, const std::vector<PeerAddress>& peers, absl::Time deadline) override;
  std::vector<std::shared_ptr<Channel>> ExpectPeers(const std::vector<PeerAddress>& peers) override;
  void SetFailureCallback(FailureCallback callback) override;

  // Says goodbye on every stream and waits (until the deadline) for the peers' goodbyes, so that
  // no data in flight is lost to a reset. A peer that stays answers at once (PeerClosed).
  absl::Status Shutdown(absl::Time deadline) override;
  // Inbound connections refused so far: "ADDRESS: reason".
  std::vector<std::string> rejections() const;
  // The budget for messages that arrive before their receives (max_unexpected_bytes), as the
  // progress thread kept it: the most it ever held, and how many arrivals found no room (their
  // stream paused until a receive was posted or room was freed).
  struct UnexpectedMemory {
    uint64_t peak_bytes = 0;
    uint64_t waits = 0;
  };
  UnexpectedMemory unexpected_memory() const {
    return {unexpected_peak_.load(std::memory_order_relaxed),
            unexpected_waits_.load(std::memory_order_relaxed)};
  }

 private:
  struct Handshake;

  explicit TcpTransport(const TcpTransportConfig& config);
  void Run();
  void Accept(AcceptGate& gate, bool local);
  // Drops the oldest connection still in its handshake (to make room for a new one).
  void ShedOldestHandshake(const std::string& why);
  void OnHandshakeReadable(Handshake& h);
  // Why a well-formed hello is refused (its proof, world, settings, TLS, the stream it names);
  // OK where it is accepted.
  absl::Status CheckHello(const Handshake& h, const PeerHello& hello) const;
  // The peers some of whose streams are not connected yet.
  std::vector<std::string> PeersMissingStreams();
  void RejectHandshake(Handshake& h, const std::string& reason);
  void DropHandshake(int fd);
  // Takes a handshake out of the table; it is freed once the event batch is done.
  void RetireHandshake(int fd);
  // Whether stream `stream` from `rank`, which dialed `to_rank`, may attach now (the handshake
  // asks before accepting; streams that arrived before this rank knew its own are asked again).
  absl::Status CheckInbound(int rank, int to_rank, int stream) const;
  absl::Status AttachInbound(int rank, int to_rank, int stream, UniqueFd fd, bool local,
                             StreamProtection protection);
  // What protects a stream that passed its handshake: TLS, frame seals, or (local) nothing.
  absl::StatusOr<StreamProtection> Protect(int fd, bool local, bool tls,
                                           const StreamSecrets& secrets, bool connector) const;
  // Attaches the streams that waited in early_ for `rank`'s channel.
  void AttachEarly(int rank);
  void CheckHandshakeDeadlines();
  void UpdateConnected();
  absl::Status ConnectStream(const PeerAddress& peer, int rank, int stream, absl::Time deadline);
  void CheckShutdown();
  // The loop's handlers, on whichever thread polls (the progress thread, or a waiter).
  void OnLoopEvent(epoll_data_t data, uint32_t events);
  void AfterLoopEvents();

  // TcpLoop.
  void Post(std::function<void()> work) override;
  void RunHereOrPost(std::function<void()> work) override;
  RequestPtr NewRequest(bool waiter_polls) override;
  void Watch(int fd, Target* target, uint32_t events) override;
  void Modify(int fd, Target* target, uint32_t events) override;
  void Unwatch(int fd) override;
  bool ReserveUnexpected(uint64_t bytes) override;
  void ReleaseUnexpected(uint64_t bytes) override;
  void OnChannelFailed(int rank, const absl::Status& why) override;

  const TcpTransportConfig config_;
  std::unique_ptr<TlsContext> tls_;
  SocketAddress address_;
  std::string published_;
  UniqueFd listener_;
  UniqueFd local_listener_;
  // Shared with the requests (Request::loop), whose waiters may still be leaving it when the
  // transport is gone.
  std::shared_ptr<EventLoop> loop_;
  std::optional<AcceptGate> accept_;
  std::optional<AcceptGate> local_accept_;
  std::thread thread_;
  Target listener_target_{nullptr, -1};
  Target local_listener_target_{nullptr, -3};

  // The loop's state: its work's, on whichever thread runs it (the progress thread, a caller it
  // lets in, or a waiter that polls).
  int rank_ = -1;
  std::vector<std::shared_ptr<TcpChannel>> channels_;
  std::map<int, std::unique_ptr<Handshake>> handshakes_;
  // Handshakes ended during the current event batch (RetireHandshake).
  std::vector<std::unique_ptr<Handshake>> retired_handshakes_;
  // Streams that completed their handshake before ConnectAll or ExpectPeers created their
  // channels.
  struct EarlyStream {
    UniqueFd fd;
    bool local;
    int to_rank;
    StreamProtection protection;
  };
  std::map<std::pair<int, int>, EarlyStream> early_;  // (rank, stream) ->
  uint64_t unexpected_bytes_ = 0;
  std::atomic<uint64_t> unexpected_peak_{0};   // Written by the progress thread only.
  std::atomic<uint64_t> unexpected_waits_{0};  // Written by the progress thread only.
  RequestPtr shutdown_request_;
  absl::Time shutdown_deadline_;
  bool stopped_ = false;  // The progress thread has ended (destruction).

  mutable Mutex mu_;
  bool all_connected_ ABSL_GUARDED_BY(mu_) = false;
  RejectionLog rejections_{"tcp"};
  FailureCallback failure_callback_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_TCP_TRANSPORT_H_
