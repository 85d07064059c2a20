#ifndef HMC_CORE_COORDINATOR_H_
#define HMC_CORE_COORDINATOR_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/accept_gate.h"
#include "core/coordinator_protocol.h"
#include "core/event_loop.h"
#include "core/frame_io.h"
#include "core/mutex.h"
#include "core/peer_table.h"
#include "core/rejection_log.h"
#include "core/socket.h"
#include "core/tls.h"

namespace hmc {

struct CoordinatorConfig {
  std::string bind = "127.0.0.1:0";
  std::string token;
  bool insecure = false;  // Allow an empty token (RequireToken).
  std::string world_id = "hmc";
  int world_size = 1;
  absl::Duration handshake_timeout = absl::Seconds(10);
  // When connections run TLS 1.3, and with which certificates (none: keys from the token). A
  // client that offers TLS always gets it; where `tls.mode` wants it, one that does not is refused.
  TlsConfig tls;
  // Zero: each rank's from its connection's round trip (HeartbeatTimeout).
  absl::Duration heartbeat_timeout = absl::ZeroDuration();
  // The most live members a running group may have; 0: world_size. A rank that joins a full
  // group waits (until its own connect deadline) for a member to leave or fail.
  int max_ranks = 0;
};

// The coordinator settings that a group's ranks must agree with: world, token, heartbeat
// timeout and TLS, from the options the ranks get. Bind and max_ranks stay the caller's.
absl::StatusOr<CoordinatorConfig> CoordinatorConfigFor(const CoreOptions& options);

// The "queen": assigns ranks, holds the peer table and a small key-value store, watches heartbeats
// and publishes membership epochs. The first epoch forms when `world_size` ranks joined; after
// that, a rank that joins gets the next unused stable id and, one joiner at a time, is announced
// to the members (same epoch, entry `joining`), connects to them, says it is ready, and becomes a
// member in the next epoch. It never carries collective data. One thread serves every
// connection with epoll; a connection that sends anything malformed is answered with an error
// frame, logged with its address, and closed, while the others keep being served.
class Coordinator {
 public:
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(const CoordinatorConfig& config);
  ~Coordinator();

  const SocketAddress& address() const { return address_; }
  // True once every rank joined and then left or failed.
  bool WaitUntilFinished(absl::Time deadline);
  // The current table (epoch 0 until the world is complete).
  PeerTable table() const;
  // Every connection refused so far, as logged: "127.0.0.1:5000: authentication failed ...".
  std::vector<std::string> rejections() const;

 private:
  struct Connection;
  // A KvGet held until its key exists or its deadline. A connection's number is reused once it
  // closes, so the answer goes to the connection's identity, never just to its descriptor.
  struct PendingGet {
    int fd;
    uint64_t connection;  // Connection::id.
    uint64_t request;
    std::string key;
    absl::Time deadline;
  };

  explicit Coordinator(const CoordinatorConfig& config);
  void Loop();
  void Accept();
  void OnReadable(Connection& c);
  // Handles every complete frame buffered; false once the connection is closing or gone.
  bool HandleFrames(Connection& c);
  int Unauthenticated() const;
  // Drops the oldest connection that has not proven the token (to make room for a new one).
  void ShedOldestUnauthenticated(const std::string& why);
  void Flush(Connection& c);
  // Sets the epoll events the loop waits for on `c`.
  void Watch(Connection& c, uint32_t events);
  // After the challenge: TLS when the client's first byte starts a handshake, plain frames when
  // this coordinator does not require TLS from it. True when frames may be read now.
  bool ChooseProtection(Connection& c);
  // Drives the TLS handshake on; true once it finished and frames may be read.
  bool AdvanceTls(Connection& c);
  void Send(Connection& c, FrameType type, const std::vector<uint8_t>& payload);
  absl::Status Handle(Connection& c, const Frame& frame);
  absl::Status HandleJoin(Connection& c, const Frame& frame);
  // A join after the first epoch formed: admitted now or held until there is room.
  void HandleLateJoin(Connection& c, const JoinRequest& join);
  // Admits the oldest held join if the group has room and nobody else is joining.
  void AdmitWaitingJoin();
  // The joining rank reached every member: the next epoch includes it.
  void FinishJoin(Connection& c, JoinedLinks links);
  // A rank of a running group coming back to this (restarted) coordinator.
  absl::Status HandleRejoin(Connection& c, const JoinRequest& join);
  // Gives `rank` to connection `c` and welcomes it.
  void Admit(Connection& c, int rank, const JoinRequest& join);
  // Rebuilding: once every member of the newest epoch a returning rank named is back, or at the
  // deadline, publishes the group (the next epoch without those who did not come back).
  void FinishRecovery(bool deadline_passed);
  void Reject(Connection& c, const std::string& reason);
  void Drop(int fd, const std::string& reason);
  // Declares `rank` failed and publishes the next epoch, unless it is not alive or `epoch` (the
  // epoch the reporter saw it fail in) has already ended.
  void DeclareFailed(int rank, uint32_t epoch, const std::string& reason);
  void CheckTimers();
  // Keys that speak to the coordinator itself: a rank finished setting up (ReadyKeyPrefix), or
  // training resumed in an epoch (ResumedKeyPrefix: logs how long after the epoch began, and why
  // it began).
  void NoteKey(const std::string& key);
  // Every id the world has given out (the first world_size, then joiners).
  int ids_given() const;
  // Marks every id gone (left or failed) once all are.
  void NoteDeparture();
  void PublishTable();
  void AnswerGets(const std::string& key);
  // The live connection that holds `get`'s request, or null once that connection is gone.
  Connection* Asker(const PendingGet& get);

  const CoordinatorConfig config_;
  SocketAddress address_;
  std::unique_ptr<TlsContext> tls_;
  UniqueFd listener_;
  std::unique_ptr<EventLoop> loop_;
  std::optional<AcceptGate> accept_;
  std::thread thread_;

  // Owned by the loop thread.
  std::map<int, std::unique_ptr<Connection>> connections_;
  std::map<std::string, std::string> kv_;
  std::vector<PendingGet> pending_gets_;
  uint64_t connections_accepted_ = 0;  // Numbers each connection (Connection::id).
  std::vector<int> rank_fd_;           // Connection of each joined rank, -1 when none.
  int joined_ = 0;
  int departed_ = 0;  // Ranks that left or failed after the world was complete.
  int joining_ = -1;  // The id of the rank joining the running group now, if any.
  // The epoch the last join started, until training resumed in it (or a newer one began): the
  // members take a join in at a round boundary, and one outstanding join epoch at a time lets
  // every member and newcomer switch through the same epochs.
  uint32_t join_epoch_ = 0;
  std::deque<std::pair<int, JoinRequest>> waiting_joins_;  // Connection and its request.
  // When each epoch began and why, until a rank says training resumed in it.
  std::map<uint32_t, std::pair<absl::Time, std::string>> epoch_began_;
  std::set<int> ready_;  // Ranks that finished setting up: a joiner waits for every member's.
  // A restarted coordinator rebuilding a running group (HandleRejoin).
  bool recovering_ = false;
  uint32_t recovery_epoch_ = 0;
  std::vector<int> recovery_members_;
  absl::Time recovery_deadline_;

  mutable Mutex mu_;
  PeerTable table_ ABSL_GUARDED_BY(mu_);
  RejectionLog rejections_{"coordinator"};
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hmc

#endif  // HMC_CORE_COORDINATOR_H_
