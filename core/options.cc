#include "core/options.h"

#include <cstdlib>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/frame_seal.h"
#include "core/tls_mode.h"
#include "core/transport_choice.h"

namespace hmc {
namespace {

using Field = std::variant<std::string Options::*, int64_t Options::*, bool Options::*,
                           absl::Duration Options::*>;

struct OptionSpec {
  absl::string_view name;
  Field field;
  absl::string_view help;
};

// The one table of options. Keep it in the order of the struct.
const OptionSpec kOptionTable[] = {
    {"coordinator", &Options::coordinator, "Coordinator address, host:port or [v6]:port."},
    {"token", &Options::token, "Shared secret for HMAC challenge-response; never sent."},
    {"insecure", &Options::insecure,
     "Allow an empty token: anyone who reaches the coordinator or a rank may join (every rank "
     "logs it). Without it an empty token is refused."},
    {"world_id", &Options::world_id, "Name of the group; peers of another world are refused."},
    {"world_size", &Options::world_size, "Number of ranks; 0 takes it from the coordinator."},
    {"rank", &Options::rank, "This process's rank; -1 lets the coordinator assign one."},
    {"zone", &Options::zone, "Zone (region or site) this rank runs in."},
    {"bind_addr", &Options::bind_addr,
     "Address the transport listens on; empty: the local address that reaches the coordinator."},
    {"tls", &Options::tls,
     "TLS 1.3 on TCP links to peers: auto (where either end's address is neither private nor "
     "loopback), on or off. Keys come from the token unless certificates are given. Never on "
     "local sockets."},
    {"tls_cert", &Options::tls_cert,
     "PEM certificate chain this rank presents; with tls_key and tls_ca, peers verify each "
     "other's certificates instead of deriving keys from the token."},
    {"tls_key", &Options::tls_key, "PEM private key of tls_cert."},
    {"tls_ca", &Options::tls_ca,
     "PEM certificates of the authorities peers' certificates must "
     "chain to."},
    {"tls_kernel", &Options::tls_kernel,
     "Hand TLS records to the kernel (kTLS) where the kernel and OpenSSL allow it, so sends stay "
     "zero-copy; off keeps sealing and opening in OpenSSL on the progress thread. Each link logs "
     "which one it got."},
    {"integrity", &Options::integrity,
     "Seal on every frame of a TCP link without TLS: mac (AES-GMAC keyed per connection from the "
     "token: changed, forged or replayed frames fail), crc (CRC-32: corruption only) or off."},
    {"transport", &Options::transport,
     "Transport of each link: tcp, ucx (UCX: RDMA where the hosts have it, else UCX's TCP), ofi "
     "(libfabric, on the provider ofi_provider names; only in a build with -DHMC_WITH_OFI=ON, "
     "unfinished), or per link class as "
     "intra=ucx,inter=tcp (intra: peers of this rank's zone). auto: UCX inside "
     "the zone where hmc was built with it and the host has an RDMA device, TCP otherwise; links "
     "between zones stay TCP unless named. A link uses UCX only where both of its ranks choose "
     "it; otherwise it falls back to TCP (logged)."},
    {"ofi_provider", &Options::ofi_provider,
     "libfabric provider of transport=ofi: tcp;ofi_rxm (its TCP provider under the RDM layer), "
     "or the fabric's own, e.g. efa, verbs;ofi_rxm."},
    {"streams", &Options::streams,
     "TCP connections per peer that large messages are striped over; 0 (auto): open max_streams "
     "and use as many as the link probe at creation shows to help."},
    {"max_streams", &Options::max_streams, "Connections per peer opened when streams is 0."},
    {"adapt_streams", &Options::adapt_streams,
     "When streams is 0: after the probe, each receiver times how fast the link's messages of "
     "each size class arrive while it has a backlog and asks the sender for more streams while "
     "that rate grows, and for fewer while it holds (per link and per size class: 256 KiB-1 MiB, "
     "1-4, 4-16, 16 MiB+)."},
    {"local_sockets", &Options::local_sockets,
     "Peers in the same network namespace (same host) connect over Unix domain sockets."},
    {"pull_min_bytes", &Options::pull_min_bytes,
     "Messages this large to a peer on local sockets are copied once, by the receiver, straight "
     "from the sender's memory (process_vm_readv); 0 turns this off."},
    {"socket_buffer_bytes", &Options::socket_buffer_bytes,
     "SO_SNDBUF/SO_RCVBUF per socket; 0 keeps kernel autotuning."},
    {"tcp_congestion", &Options::tcp_congestion,
     "TCP congestion control of every TCP connection (e.g. cubic, bbr, reno; see "
     "/proc/sys/net/ipv4/tcp_available_congestion_control); empty: the host's default."},
    {"stripe_min_bytes", &Options::stripe_min_bytes,
     "Messages smaller than this travel on one stream."},
    {"max_frame_bytes", &Options::max_frame_bytes,
     "Largest frame accepted; longer lengths are rejected before any allocation."},
    {"max_unexpected_bytes", &Options::max_unexpected_bytes,
     "Memory for messages that arrive before their receive is posted; beyond it reading pauses."},
    {"algo", &Options::algo,
     "All-reduce algorithm: auto (the tuner) or a name from the collectives' registry "
     "(collectives/allreduce_algorithms.cc; `hmcrun --help` lists them): ring, butterfly, ..."},
    {"codec_inter", &Options::codec_inter,
     "Codec on links between zones: none, fp16, bf16, int8[:block=N], uniform8, quantile8, "
     "topk[:ratio=R], powersgd[:rank=R], or auto (int8 where it beats the link). Lossy codecs "
     "apply to f32/f16/bf16 sums and averages (butterfly and hierarchical)."},
    {"codec_intra", &Options::codec_intra, "Codec on links inside a zone (as codec_inter)."},
    {"shares", &Options::shares,
     "Butterfly: the share each rank reduces: auto (balanced from measured bandwidth), equal, or "
     "one non-negative weight per rank, comma-separated."},
    {"probe", &Options::probe,
     "Measure round trip and bandwidth between every pair of ranks at creation (bounded: about "
     "20 round trips of the longest link, at most 2 s)."},
    {"explore", &Options::explore,
     "auto: the first all-reduces of each size class (a power of two of bytes, dtype, op, codecs) "
     "run each candidate algorithm once, the rules' choice first, and later ones run the fastest "
     "(times agreed by all ranks); 0: the rules alone."},
    {"pace_sends", &Options::pace_sends,
     "The hierarchical plan's cross-zone sends share this rank's sending rate, as a phase "
     "that filled its NIC measured it (the hierarchical plan's in-zone exchange), each link paced "
     "(SO_MAX_PACING_RATE) in proportion to its bytes so that all finish together; 0: unpaced "
     "(TCP shares the NIC, and links with long round trips lose)."},
    {"prices", &Options::prices,
     "Egress price table (lines FROM_ZONE TO_ZONE USD_PER_GB); empty: built-in cloud prices."},
    {"small_message_bytes", &Options::small_message_bytes,
     "auto uses one-shot or halving-doubling (the tuner's latency model) below this size and "
     "the pipelined ring from it."},
    {"chunk_bytes", &Options::chunk_bytes,
     "Largest pipeline segment; all-reduce uses at most a quarter of each rank's part (at least "
     "64 KiB) so that short vectors pipeline too."},
    {"check_args", &Options::check_args,
     "Compare count, dtype, op and root across ranks before data moves."},
    {"workers", &Options::workers, "Threads that run collectives; several may be in flight."},
    {"bind", &Options::bind,
     "Bind this rank to its share of the machine (hwloc: with local_size ranks on a machine, each "
     "gets its part, spread over packages and NUMA nodes) and its transports' progress threads to "
     "the part of it nearest the NIC that carries its traffic. The choice is logged and shown by "
     "hmc-perf --probe; 0 leaves every thread unbound."},
    {"local_rank", &Options::local_rank,
     "This rank's index among the ranks on its machine (hmcrun sets it)."},
    {"local_size", &Options::local_size, "How many ranks run on this machine (hmcrun sets it)."},
    {"min_ranks", &Options::min_ranks,
     "After a rank fails, the survivors go on in a new membership epoch while at least this many "
     "ranks live; below it the communicator refuses further calls."},
    {"timeout", &Options::timeout, "Default deadline of a collective (e.g. 300s)."},
    {"connect_timeout", &Options::connect_timeout,
     "Deadline for joining the coordinator and connecting to every peer."},
    {"heartbeat_interval", &Options::heartbeat_interval,
     "How often a rank tells the coordinator it lives."},
    {"heartbeat_timeout", &Options::heartbeat_timeout,
     "Silence after which a rank is declared failed: by the coordinator (no heartbeat) and on "
     "data links (unacknowledged data or unanswered keepalives, TCP_USER_TIMEOUT); 0 (auto): ten "
     "round trips of the rank's coordinator connection and at least 3 s at the coordinator, 10 s "
     "on data links (several retransmissions of a lossy 300 ms path fit in it)."},
};

std::string EnvName(absl::string_view name) { return "HMC_" + absl::AsciiStrToUpper(name); }

const OptionSpec* Find(absl::string_view name) {
  for (const OptionSpec& spec : kOptionTable) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

absl::Status Assign(Options& options, const OptionSpec& spec, absl::string_view value) {
  auto bad = [&](absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrFormat("option %s (%s): '%s' is not %s", spec.name,
                                                      EnvName(spec.name), value, expected));
  };
  if (auto* f = std::get_if<std::string Options::*>(&spec.field)) {
    options.*(*f) = std::string(value);
  } else if (auto* f = std::get_if<int64_t Options::*>(&spec.field)) {
    int64_t parsed;
    if (!absl::SimpleAtoi(value, &parsed)) return bad("an integer");
    options.*(*f) = parsed;
  } else if (auto* f = std::get_if<bool Options::*>(&spec.field)) {
    bool parsed;
    if (!absl::SimpleAtob(value, &parsed)) return bad("a boolean (0/1, true/false)");
    options.*(*f) = parsed;
  } else if (auto* f = std::get_if<absl::Duration Options::*>(&spec.field)) {
    absl::Duration parsed;
    if (!absl::ParseDuration(value, &parsed)) return bad("a duration such as 10s or 250ms");
    options.*(*f) = parsed;
  }
  return absl::OkStatus();
}

std::string Format(const Options& options, const OptionSpec& spec) {
  return std::visit(
      [&](auto field) -> std::string {
        const auto& value = options.*field;
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, absl::Duration>) {
          return absl::FormatDuration(value);
        } else if constexpr (std::is_same_v<T, bool>) {
          return value ? "1" : "0";
        } else {
          return absl::StrCat(value);
        }
      },
      spec.field);
}

absl::Status Validate(const Options& o) {
  if (o.streams < 0 || o.streams > 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("streams=%d: must be 1..64, or 0 for auto", o.streams));
  }
  if (o.max_streams < 1 || o.max_streams > 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_streams=%d: must be 1..64", o.max_streams));
  }
  if (o.chunk_bytes < 4096) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk_bytes=%d: must be at least 4096", o.chunk_bytes));
  }
  if (o.local_size < 1 || o.local_rank < 0 || o.local_rank >= o.local_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("local_rank=%d, local_size=%d: the local rank must be below the size",
                        o.local_rank, o.local_size));
  }
  if (o.workers < 1 || o.workers > 64) {
    return absl::InvalidArgumentError(absl::StrFormat("workers=%d: must be 1..64", o.workers));
  }
  if (absl::StatusOr<TlsMode> tls = ParseTlsMode(o.tls); !tls.ok()) return tls.status();
  if (absl::StatusOr<TransportChoice> t = ParseTransportChoice(o.transport); !t.ok()) {
    return t.status();
  }
  if (absl::StatusOr<FrameIntegrity> integrity = ParseFrameIntegrity(o.integrity);
      !integrity.ok()) {
    return integrity.status();
  }
  if (o.max_frame_bytes < 4096 || o.max_unexpected_bytes < 0 || o.stripe_min_bytes < 1 ||
      o.socket_buffer_bytes < 0 || o.small_message_bytes < 0 || o.pull_min_bytes < 0) {
    return absl::InvalidArgumentError("a size option is out of range");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Options> Options::FromEnvironment() {
  Options options;
  for (const OptionSpec& spec : kOptionTable) {
    const char* value = std::getenv(EnvName(spec.name).c_str());
    if (value == nullptr) continue;
    if (absl::Status s = Assign(options, spec, value); !s.ok()) return s;
  }
  if (absl::Status s = Validate(options); !s.ok()) return s;
  return options;
}

absl::Status Options::Set(absl::string_view name, absl::string_view value) {
  const OptionSpec* spec = Find(name);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("unknown option '%s'", name));
  }
  Options candidate = *this;
  if (absl::Status s = Assign(candidate, *spec, value); !s.ok()) return s;
  if (absl::Status s = Validate(candidate); !s.ok()) return s;
  *this = std::move(candidate);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Options::ApplyFlags(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  for (const std::string& arg : args) {
    absl::string_view view = arg;
    const size_t eq = view.find('=');
    if (absl::StartsWith(view, "--") && eq != absl::string_view::npos &&
        Find(view.substr(2, eq - 2)) != nullptr) {
      if (absl::Status s = Set(view.substr(2, eq - 2), view.substr(eq + 1)); !s.ok()) return s;
    } else {
      rest.push_back(arg);
    }
  }
  return rest;
}

std::vector<std::string> Options::ToEnvironment() const {
  std::vector<std::string> env;
  for (const OptionSpec& spec : kOptionTable) {
    env.push_back(EnvName(spec.name) + "=" + Format(*this, spec));
  }
  return env;
}

std::string Options::DescribeAll() {
  const Options defaults;
  std::string out = "| option | variable | default | meaning |\n|---|---|---|---|\n";
  for (const OptionSpec& spec : kOptionTable) {
    std::string value = Format(defaults, spec);
    absl::StrAppend(&out, "| `--", spec.name, "` | `", EnvName(spec.name), "` | ",
                    value.empty() ? "(empty)" : "`" + value + "`", " | ", spec.help, " |\n");
  }
  return out;
}

}  // namespace hmc
