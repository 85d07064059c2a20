#ifndef HMC_TRANSPORTS_TCP_CMA_H_
#define HMC_TRANSPORTS_TCP_CMA_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace hmc {

// Single-copy transfers between processes of one host with Linux cross-memory attach
// (process_vm_readv): the receiver copies straight from the sender's buffer into its own, where a
// socket would copy twice (into the kernel and out again). Used for large messages between peers
// connected over local sockets.
//
// What may be read is decided by the kernel and the sender, never by the offer alone:
// - the process read from is the one at the other end of the Unix socket, as the kernel reports
//   it (SO_PEERCRED), and it must run as this process's user;
// - the sender registers each offered message (tag, address, length) in its own memory, and the
//   receiver reads that registration from the process before it reads the message: an offer that
//   names anything else is forged;
// - the registration carries a random identity of the sender's process, so that a pid reused by
//   another process after the sender died holds no matching registration.

// Lives in the sender's memory while its offer is outstanding.
struct PullRegistration {
  char identity[16];
  uint64_t tag;
  uint64_t address;
  uint64_t bytes;
};

// The offer on the wire: where the message and its registration are in the sender.
struct PullOffer {
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t registration = 0;
  std::array<char, sizeof(PullRegistration::identity)> identity{};  // The registration's.

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<PullOffer> Parse(std::span<const uint8_t> bytes);
};

// Sender: registers `bytes` at `data` as message `tag`; keep it alive until the peer answers.
std::unique_ptr<PullRegistration> RegisterPull(uint64_t tag, const void* data, uint64_t bytes);
PullOffer OfferOf(const PullRegistration& registration);

// The process at the other end of a Unix domain socket, as the kernel reports it.
struct PeerProcess {
  pid_t pid = 0;  // 0: not visible from this pid namespace.
  uid_t uid = 0;
};
absl::StatusOr<PeerProcess> PeerProcessOf(int unix_fd);

// Receiver: checks `offer` for message `tag` against what `peer` registered, then copies its
// `offer.bytes` into `dest`. FailedPrecondition: this process cannot read the peer (another user,
// another pid namespace, ptrace restrictions, the peer is gone): the sender should stream instead.
// DataLoss: the offer names memory the peer did not register for this message.
absl::Status PullOffered(const PeerProcess& peer, uint64_t tag, const PullOffer& offer, void* dest);

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_CMA_H_
