#include "transports/tcp/cma.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "core/auth.h"
#include "core/wire.h"

namespace hmc {
namespace {

// This process's identity: random, fixed for its lifetime.
const std::string& ProcessIdentity() {
  static const std::string* identity =
      new std::string(RandomNonce().substr(0, sizeof(PullRegistration::identity)));
  return *identity;
}

absl::Status ReadFrom(pid_t pid, uint64_t address, void* dest, uint64_t bytes) {
  uint64_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<uint8_t*>(dest) + done, bytes - done};
    iovec from{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t n = process_vm_readv(pid, &local, 1, &from, 1, 0);
    if (n <= 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "process_vm_readv from pid %d: %s", pid, n < 0 ? std::strerror(errno) : "no progress"));
    }
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<uint8_t> PullOffer::Serialize() const {
  WireWriter w;
  w.Put<uint64_t>(address);
  w.Put<uint64_t>(bytes);
  w.Put<uint64_t>(registration);
  w.PutString(absl::string_view(identity.data(), identity.size()));
  return w.bytes();
}

absl::StatusOr<PullOffer> PullOffer::Parse(std::span<const uint8_t> bytes) {
  WireReader r(bytes);
  PullOffer offer;
  offer.address = r.Get<uint64_t>();
  offer.bytes = r.Get<uint64_t>();
  offer.registration = r.Get<uint64_t>();
  const std::string identity = r.GetString();
  if (!r.done() || identity.size() != offer.identity.size()) {
    return absl::DataLossError("malformed offer to pull");
  }
  std::memcpy(offer.identity.data(), identity.data(), identity.size());
  return offer;
}

std::unique_ptr<PullRegistration> RegisterPull(uint64_t tag, const void* data, uint64_t bytes) {
  auto r = std::make_unique<PullRegistration>();
  std::memcpy(r->identity, ProcessIdentity().data(), sizeof(r->identity));
  r->tag = tag;
  r->address = reinterpret_cast<uint64_t>(data);
  r->bytes = bytes;
  return r;
}

PullOffer OfferOf(const PullRegistration& registration) {
  PullOffer offer{registration.address, registration.bytes,
                  reinterpret_cast<uint64_t>(&registration)};
  std::memcpy(offer.identity.data(), registration.identity, offer.identity.size());
  return offer;
}

absl::StatusOr<PeerProcess> PeerProcessOf(int unix_fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(unix_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat("SO_PEERCRED: %s", std::strerror(errno)));
  }
  return PeerProcess{cred.pid, cred.uid};
}

absl::Status PullOffered(const PeerProcess& peer, uint64_t tag, const PullOffer& offer,
                         void* dest) {
  if (peer.pid <= 0) {
    return absl::FailedPreconditionError("the peer's process is not visible from here");
  }
  // Read once: a small message's pull is a few system calls, and each counts.
  static const uid_t euid = geteuid();
  if (peer.uid != euid) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the peer runs as uid %d, this process as %d", peer.uid, euid));
  }
  PullRegistration registered;
  if (absl::Status s = ReadFrom(peer.pid, offer.registration, &registered, sizeof(registered));
      !s.ok()) {
    return s;
  }
  if (std::memcmp(registered.identity, offer.identity.data(), offer.identity.size()) != 0 ||
      registered.tag != tag || registered.address != offer.address ||
      registered.bytes != offer.bytes) {
    return absl::DataLossError(absl::StrFormat(
        "its offer to pull tag %#x (%d bytes at %#x) does not match what its process (pid %d) "
        "registered",
        tag, offer.bytes, offer.address, peer.pid));
  }
  return ReadFrom(peer.pid, offer.address, dest, offer.bytes);
}

}  // namespace hmc
