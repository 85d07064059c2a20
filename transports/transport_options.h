#ifndef HMC_TRANSPORTS_TRANSPORT_OPTIONS_H_
#define HMC_TRANSPORTS_TRANSPORT_OPTIONS_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "core/option_table.h"

namespace hmc {

// The transports' tunables: which transport carries each link, and TCP's streams, frame seals,
// socket tuning and memory bounds (read by transports/transport_factory.cc). Named as every
// option is (core/option_table.h); Table() documents each one.
struct TransportOptions {
  std::string integrity = "mac";   // Frame seals where TLS is off: mac, crc or off.
  std::string transport = "auto";  // Per link class: auto, tcp, ucx, ofi, intra=ucx,...
  std::string ofi_provider = "tcp;ofi_rxm";
  std::string ofi_register = "auto";     // Buffers registered: auto (where required) or always.
  int64_t streams = 0;                   // TCP connections per peer; 0: chosen by a probe.
  int64_t max_streams = 32;              // Connections opened when streams is 0.
  bool adapt_streams = true;             // When streams is 0: per link and size, from transfers.
  bool local_sockets = true;             // Unix domain sockets to peers in this network namespace.
  bool waiters_poll = true;              // A thread that waits for small messages polls TCP.
  int64_t waiter_spin_us = -1;           // Its spin before it sleeps; -1: by ranks and CPUs.
  int64_t pull_min_bytes = 64 << 10;     // Single-copy pulls from local peers; 0: off.
  int64_t socket_buffer_bytes = 0;       // SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning.
  std::string tcp_congestion;            // TCP_CONGESTION of every TCP socket; empty: the host's.
  int64_t stripe_min_bytes = 256 << 10;  // Messages below this go on one stream.
  int64_t max_frame_bytes = int64_t{1} << 32;
  int64_t max_unexpected_bytes = int64_t{256} << 20;

  // The connections opened to each peer: `streams`, or `max_streams` when a probe chooses.
  int connections_per_peer() const { return static_cast<int>(streams > 0 ? streams : max_streams); }
  // Whether each receiver adapts its links' stream counts from their transfers.
  bool adapts_streams() const { return streams == 0 && adapt_streams; }

  static std::span<const OptionSpec<TransportOptions>> Table();
  absl::Status Validate() const;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TRANSPORT_OPTIONS_H_
