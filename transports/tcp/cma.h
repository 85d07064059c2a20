#ifndef HMC_TRANSPORTS_TCP_CMA_H_
#define HMC_TRANSPORTS_TCP_CMA_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hmc {

// Single-copy transfers between processes of one host with Linux cross-memory attach
// (process_vm_readv): the receiver copies straight from the sender's buffer into its own, where a
// socket would copy twice (into the kernel and out again). Used for large messages between peers
// connected over local sockets.
//
// A pid names a process only within a pid namespace, and containers that share a network
// namespace need not share one; so a description also carries a random identity of the sender's
// process and where it lives, and the receiver checks that the pid it reads from holds it.
struct RemoteBuffer {
  uint32_t pid = 0;
  uint64_t address = 0;
  uint64_t identity_address = 0;
  std::string identity;

  std::vector<uint8_t> Serialize() const;
  static absl::StatusOr<RemoteBuffer> Parse(std::span<const uint8_t> bytes);
};

// Describes `data` in this process for a peer to pull.
RemoteBuffer DescribeLocalBuffer(const void* data);

// Whether `remote.pid` is readable and is the process that described the buffer.
bool IsSameProcess(const RemoteBuffer& remote);

// Copies `bytes` from the remote buffer into `dest`.
absl::Status PullRemote(const RemoteBuffer& remote, void* dest, uint64_t bytes);

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_CMA_H_
