#include "transports/transport_options.h"

#include "absl/strings/str_format.h"
#include "core/frame_seal.h"
#include "core/transport_choice.h"

namespace hmc {
namespace {

// In the order of the struct.
const OptionSpec<TransportOptions> kTransportOptions[] = {
    {"integrity", &TransportOptions::integrity,
     "Seal on every frame of a TCP link without TLS: mac (AES-GMAC keyed per connection from the "
     "token: changed, forged or replayed frames fail), crc (CRC-32: corruption only) or off."},
    {"transport", &TransportOptions::transport,
     "Transport of each link: tcp, ucx (UCX: RDMA where the hosts have it, else UCX's TCP), ofi "
     "(libfabric, on the provider ofi_provider names; in a build with libfabric), or per link "
     "class as "
     "intra=ucx,inter=tcp (intra: peers of this rank's zone). auto: UCX inside "
     "the zone where hmc was built with it and the host has an RDMA device, TCP otherwise; links "
     "between zones stay TCP unless named. A link uses UCX only where both of its ranks choose "
     "it; otherwise it falls back to TCP (logged)."},
    {"ofi_provider", &TransportOptions::ofi_provider,
     "libfabric provider of transport=ofi: tcp;ofi_rxm (its TCP provider under the RDM layer), "
     "or the fabric's own, e.g. efa, verbs;ofi_rxm."},
    {"ofi_register", &TransportOptions::ofi_register,
     "libfabric: register the buffer of every send and receive with the domain where the "
     "provider requires it (auto: FI_MR_LOCAL, as verbs and EFA do), or always."},
    {"streams", &TransportOptions::streams,
     "TCP connections per peer that large messages are striped over; 0 (auto): open max_streams "
     "and use as many as the link probe at creation shows to help."},
    {"max_streams", &TransportOptions::max_streams,
     "Connections per peer opened when streams is 0."},
    {"adapt_streams", &TransportOptions::adapt_streams,
     "When streams is 0: links of 10 ms or more start on every connection (others on the "
     "probe's count), and each receiver times how fast the link's messages of each size class "
     "arrive while it has a backlog and asks the sender for more streams while that rate grows, "
     "and for fewer while it holds (per link and per size class: 256 KiB-1 MiB, 1-4, 4-16, "
     "16 MiB+)."},
    {"local_sockets", &TransportOptions::local_sockets,
     "Peers in the same network namespace (same host) connect over Unix domain sockets."},
    {"waiters_poll", &TransportOptions::waiters_poll,
     "A thread that waits for TCP sends and receives of messages below stripe_min_bytes polls "
     "the sockets and handles what arrives itself, where no other thread does, instead of "
     "sleeping until the progress thread has (one thread hand-off per message fewer); the "
     "progress thread takes the sockets back 2 ms after the last such wait, or at once when a "
     "larger message or a point-to-point call is posted (it reads and writes while the waiter "
     "reduces)."},
    {"waiter_spin_us", &TransportOptions::waiter_spin_us,
     "How long, in microseconds, a polling waiter (waiters_poll) keeps asking for events before "
     "it sleeps: a message that arrives meanwhile costs no wake-up. Where the ranks on this host "
     "(local_size, or this one and its peers on local sockets where they are more) outnumber its "
     "online CPUs, the waiter gives its CPU away (sched_yield) after each empty poll, so that the "
     "rank it waits for runs at once, and spins only after a wait no longer than two spins (a "
     "yield to a rank that computes gives it a whole time slice). -1 (auto): 50 where they do "
     "not, 100 where they do."},
    {"pull_min_bytes", &TransportOptions::pull_min_bytes,
     "Messages this large to a peer on local sockets are copied once, by the receiver, straight "
     "from the sender's memory (process_vm_readv); 0 turns this off. The argument check's "
     "messages are always streamed."},
    {"socket_buffer_bytes", &TransportOptions::socket_buffer_bytes,
     "SO_SNDBUF/SO_RCVBUF per socket; 0 keeps kernel autotuning."},
    {"tcp_congestion", &TransportOptions::tcp_congestion,
     "TCP congestion control of every TCP connection (e.g. cubic, bbr, reno; see "
     "/proc/sys/net/ipv4/tcp_available_congestion_control); empty: the host's default."},
    {"stripe_min_bytes", &TransportOptions::stripe_min_bytes,
     "Messages smaller than this travel on one stream."},
    {"max_frame_bytes", &TransportOptions::max_frame_bytes,
     "Largest frame accepted; longer lengths are rejected before any allocation."},
    {"max_unexpected_bytes", &TransportOptions::max_unexpected_bytes,
     "Memory for messages that arrive before their receive is posted; beyond it reading pauses."},
};

}  // namespace

std::span<const OptionSpec<TransportOptions>> TransportOptions::Table() {
  return kTransportOptions;
}

absl::Status TransportOptions::Validate() const {
  if (streams < 0 || streams > 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("streams=%d: must be 1..64, or 0 for auto", streams));
  }
  if (max_streams < 1 || max_streams > 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_streams=%d: must be 1..64", max_streams));
  }
  if (absl::StatusOr<TransportChoice> t = ParseTransportChoice(transport); !t.ok()) {
    return t.status();
  }
  if (absl::StatusOr<FrameIntegrity> seal = ParseFrameIntegrity(integrity); !seal.ok()) {
    return seal.status();
  }
  if (ofi_register != "auto" && ofi_register != "always") {
    return absl::InvalidArgumentError(
        absl::StrFormat("ofi_register=%s: must be auto or always", ofi_register));
  }
  if (max_frame_bytes < 4096 || max_unexpected_bytes < 0 || stripe_min_bytes < 1 ||
      socket_buffer_bytes < 0 || pull_min_bytes < 0 || waiter_spin_us < -1) {
    return absl::InvalidArgumentError("a size option of the transports is out of range");
  }
  return absl::OkStatus();
}

}  // namespace hmc
