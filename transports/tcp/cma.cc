#include "transports/tcp/cma.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "core/auth.h"
#include "core/wire.h"

namespace hmc {
namespace {

constexpr size_t kIdentityBytes = 16;

// This process's identity: random, fixed for its lifetime, readable by peers at its address.
const std::string& ProcessIdentity() {
  static const std::string* identity = new std::string(RandomNonce().substr(0, kIdentityBytes));
  return *identity;
}

}  // namespace

std::vector<uint8_t> RemoteBuffer::Serialize() const {
  WireWriter w;
  w.Put<uint32_t>(pid);
  w.Put<uint64_t>(address);
  w.Put<uint64_t>(identity_address);
  w.PutString(identity);
  return w.bytes();
}

absl::StatusOr<RemoteBuffer> RemoteBuffer::Parse(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  RemoteBuffer b;
  b.pid = r.Get<uint32_t>();
  b.address = r.Get<uint64_t>();
  b.identity_address = r.Get<uint64_t>();
  b.identity = r.GetString();
  if (!r.done() || b.identity.size() != kIdentityBytes) {
    return absl::DataLossError("malformed rendezvous");
  }
  return b;
}

RemoteBuffer DescribeLocalBuffer(const void* data) {
  const std::string& identity = ProcessIdentity();
  return RemoteBuffer{static_cast<uint32_t>(getpid()), reinterpret_cast<uint64_t>(data),
                      reinterpret_cast<uint64_t>(identity.data()), identity};
}

bool IsSameProcess(const RemoteBuffer& remote) {
  char seen[kIdentityBytes];
  return PullRemote(RemoteBuffer{remote.pid, remote.identity_address, 0, ""}, seen, kIdentityBytes)
             .ok() &&
         std::memcmp(seen, remote.identity.data(), kIdentityBytes) == 0;
}

absl::Status PullRemote(const RemoteBuffer& remote, void* dest, uint64_t bytes) {
  uint64_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<uint8_t*>(dest) + done, bytes - done};
    iovec from{reinterpret_cast<void*>(remote.address + done), bytes - done};
    const ssize_t n = process_vm_readv(static_cast<pid_t>(remote.pid), &local, 1, &from, 1, 0);
    if (n <= 0) {
      return absl::UnavailableError(absl::StrFormat("process_vm_readv from pid %d: %s", remote.pid,
                                                    n < 0 ? std::strerror(errno) : "no progress"));
    }
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace hmc
