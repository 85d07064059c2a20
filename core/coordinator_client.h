#ifndef HMC_CORE_COORDINATOR_CLIENT_H_
#define HMC_CORE_COORDINATOR_CLIENT_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/coordinator_protocol.h"
#include "core/frame.h"
#include "core/frame_io.h"
#include "core/mutex.h"
#include "core/options.h"
#include "core/peer_table.h"
#include "core/socket.h"
#include "core/stream_io.h"
#include "core/tls.h"

namespace hmc {

// A rank's connection to the coordinator. Connect() dials, reads the challenge and, where option
// `tls` wants it for the coordinator's address, runs TLS 1.3 over the rest; Join() proves
// the token, registers the transport address and learns the rank. A background thread then sends
// heartbeats and receives peer tables (membership epochs) and key-value answers.
class CoordinatorClient {
 public:
  using MembershipCallback = std::function<void(const PeerTable&)>;

  static absl::StatusOr<std::unique_ptr<CoordinatorClient>> Connect(const CoreOptions& options);
  ~CoordinatorClient();  // Leaves cleanly if still joined.

  // The local address of the connection: the interface that reaches the coordinator.
  const SocketAddress& local_address() const { return local_; }

  absl::Status Join(const std::string& transport_address, absl::Time deadline);
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Waits for the first peer table: the first epoch's (every rank joined), or, for a rank that
  // joins a running group, the current epoch's with this rank `joining`.
  absl::StatusOr<PeerTable> WaitForPeers(absl::Time deadline);
  // A joining rank that connected to every member says so, with what it measured of its links,
  // then waits for the epoch that makes it a member (or the error that it cannot be one).
  absl::StatusOr<PeerTable> FinishJoin(const JoinedLinks& links, absl::Time deadline);
  // The newest table received; epoch 0 before the first.
  PeerTable table() const;
  // Called on the client's thread for every table after the first, i.e. on membership changes, and
  // with a table whose epoch is 0 if the coordinator connection is lost.
  void SetMembershipCallback(MembershipCallback callback);

  absl::Status Put(const std::string& key, const std::string& value, absl::Time deadline);
  // Waits until the key exists or the deadline passes.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Time deadline);
  // Get for many keys in one round trip: every request is sent before any answer is awaited.
  std::vector<absl::StatusOr<std::string>> GetMany(const std::vector<std::string>& keys,
                                                   absl::Time deadline);

  // Tells the coordinator that `rank` failed on the data path while the group was at `epoch`
  // (Suspicion); the coordinator publishes the next epoch without it.
  absl::Status ReportFailure(uint32_t epoch, int rank, const std::string& cause);

  // Tells the coordinator this rank is done, so its disconnection is not a failure.
  void Leave();

 private:
  // A dialed connection: its socket, how bytes cross it, the challenge's nonce.
  struct Link {
    UniqueFd fd;
    std::unique_ptr<StreamIo> io;  // Declared after fd: goes first.
    std::string nonce;
  };

  CoordinatorClient(const CoreOptions& options, TlsMode tls_mode, std::unique_ptr<TlsContext> tls);
  // Connects (retrying refused connections: the coordinator may be starting or restarting), reads
  // the challenge and finishes TLS where it is wanted.
  absl::StatusOr<Link> Dial(absl::Time deadline) const;
  void Run();
  // Run's steps: a heartbeat once `next_heartbeat` is here (and the next one's time), and what
  // the coordinator sent; false once the client shut down.
  bool HeartbeatIfDue(FrameParser& parser, absl::Time& next_heartbeat);
  bool HandleFrame(const Frame& f);
  absl::Status Write(FrameType type, const std::vector<uint8_t>& payload, absl::Time deadline);
  absl::StatusOr<std::string> Request(FrameType type, const std::string& key,
                                      const std::string& value, absl::Time deadline);
  // The two halves of Request: register and write; wait for the answer.
  absl::StatusOr<uint64_t> SendRequest(FrameType type, const std::string& key,
                                       const std::string& value, absl::Time deadline);
  absl::StatusOr<std::string> AwaitAnswer(uint64_t request, const std::string& key,
                                          absl::Time deadline);
  void Shutdown(const absl::Status& why);
  // The join handshake on `link`: a first join (epoch 0) or a return to a restarted coordinator.
  absl::StatusOr<Welcome> Handshake(Link& link, uint32_t epoch, const std::vector<int32_t>& members,
                                    absl::Time deadline);
  // Dials the coordinator again and rejoins at the current epoch, for up to connect_timeout
  // (a restarted coordinator rebuilds the group from the ranks that come back).
  absl::Status Reconnect();
  // After the connection broke (`cause`): Reconnect, or shut down; false when shut down.
  bool ComeBack(absl::string_view cause, FrameParser& parser);

  const CoreOptions options_;
  const TlsMode tls_mode_;
  const std::unique_ptr<TlsContext> tls_;
  SocketAddress local_;
  std::string coordinator_;
  std::string transport_address_;
  int rank_ = -1;
  int world_size_ = 0;
  std::thread thread_;

  // Every use of the connection: frames go out whole, and TLS takes one call at a time. Replaced
  // only by the client's thread (Reconnect).
  Mutex io_mu_;
  Link link_ ABSL_GUARDED_BY(io_mu_);
  mutable Mutex mu_;
  std::optional<PeerTable> table_ ABSL_GUARDED_BY(mu_);
  MembershipCallback callback_ ABSL_GUARDED_BY(mu_);
  // A request from when it is written until its caller takes the answer. One not answered yet is
  // written again on a new connection (written while the old one was dying, it would be lost; a
  // Put or Get twice is the same).
  struct PendingRequest {
    FrameType type;
    std::vector<uint8_t> payload;
    std::optional<std::pair<bool, std::string>> answer;  // found, value
  };
  std::map<uint64_t, PendingRequest> requests_ ABSL_GUARDED_BY(mu_);
  uint64_t next_request_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool left_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hmc

#endif  // HMC_CORE_COORDINATOR_CLIENT_H_
