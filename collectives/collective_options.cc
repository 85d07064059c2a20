#include "collectives/collective_options.h"

#include "absl/strings/str_format.h"

namespace hmc {
namespace {

// In the order of the struct.
const OptionSpec<CollectiveOptions> kCollectiveOptions[] = {
    {"algo", &CollectiveOptions::algo,
     "All-reduce algorithm: auto (the tuner) or a name from the collectives' registry "
     "(collectives/allreduce_algorithms.cc; `hmcrun --help` lists them): ring, butterfly, ..."},
    {"codec_inter", &CollectiveOptions::codec_inter,
     "Codec on links between zones: none, fp16, bf16, int8[:block=N], uniform8, quantile8, "
     "topk[:ratio=R], powersgd[:rank=R], or auto (int8 where it beats the link). Lossy codecs "
     "apply to f32/f16/bf16 sums and averages (butterfly and hierarchical)."},
    {"codec_intra", &CollectiveOptions::codec_intra,
     "Codec on links inside a zone (as codec_inter)."},
    {"shares", &CollectiveOptions::shares,
     "Butterfly: the share each rank reduces: auto (balanced from measured bandwidth), equal, or "
     "one non-negative weight per rank, comma-separated."},
    {"probe", &CollectiveOptions::probe,
     "Measure round trip and bandwidth between every pair of ranks at creation (bounded: about "
     "20 round trips of the longest link, at most 2 s)."},
    {"explore", &CollectiveOptions::explore,
     "auto: the first all-reduces of each size class (a power of two of bytes, dtype, op, codecs) "
     "run each candidate algorithm once, the rules' choice first, and later ones run the fastest "
     "(times agreed by all ranks); 0: the rules alone."},
    {"pace_sends", &CollectiveOptions::pace_sends,
     "The hierarchical plan's cross-zone sends share this rank's sending rate, as a phase "
     "that filled its NIC measured it (the hierarchical plan's in-zone exchange), each link paced "
     "(SO_MAX_PACING_RATE) in proportion to its bytes so that all finish together; 0: unpaced "
     "(TCP shares the NIC, and links with long round trips lose)."},
    {"prices", &CollectiveOptions::prices,
     "Egress price table (lines FROM_ZONE TO_ZONE USD_PER_GB); empty: built-in cloud prices."},
    {"small_message_bytes", &CollectiveOptions::small_message_bytes,
     "auto uses one-shot or halving-doubling (the tuner's latency model) below this size and "
     "the pipelined ring from it."},
    {"chunk_bytes", &CollectiveOptions::chunk_bytes,
     "Largest pipeline segment; all-reduce uses at most a quarter of each rank's part (at least "
     "64 KiB) so that short vectors pipeline too."},
    {"check_args", &CollectiveOptions::check_args,
     "Compare count, dtype, op, root, algorithm and plan across ranks before any data is used "
     "(the one-shot's vector and the ring's first step travel with the check; a mismatch drops "
     "them)."},
    {"check_exchange", &CollectiveOptions::check_exchange,
     "How the argument check's messages (with the one-shot's vector) reach every member: direct "
     "(each rank sends its own to every other: n-1 messages a rank, one latency) or forwarded "
     "(Bruck's all-gather: ceil(log2 n) messages a rank, as many latencies). auto: forwarded "
     "where every member runs on one host with fewer CPUs than members and no measured round "
     "trip reaches 1 ms, where messages cost CPU more than latency; direct otherwise."},
    {"workers", &CollectiveOptions::workers,
     "Threads that run collectives; several may be in flight. A caller that waits for a "
     "collective no worker has started runs it itself."},
    {"waiter_grace", &CollectiveOptions::waiter_grace,
     "How long a collective waits for its caller before a worker runs it (e.g. 1ms): a caller "
     "that waits within it runs the collective on its own thread, with no thread hand-off; one "
     "that goes on without waiting has it started by a worker at the end of the grace, or when "
     "it makes its next call. 0: a worker takes every collective at once."},
    {"bind", &CollectiveOptions::bind,
     "Bind this rank to its share of the machine (hwloc: with local_size ranks on a machine, each "
     "gets its part, spread over packages and NUMA nodes) and its transports' progress threads to "
     "the part of it nearest the NIC that carries its traffic. The choice is logged and shown by "
     "hmc-perf --probe; 0 leaves every thread unbound."},
    {"local_rank", &CollectiveOptions::local_rank,
     "This rank's index among the ranks on its machine (hmcrun sets it)."},
    {"local_size", &CollectiveOptions::local_size,
     "How many ranks run on this machine (hmcrun sets it)."},
    {"min_ranks", &CollectiveOptions::min_ranks,
     "After a rank fails, the survivors go on in a new membership epoch while at least this many "
     "ranks live; below it the communicator refuses further calls."},
    {"timeout", &CollectiveOptions::timeout, "Default deadline of a collective (e.g. 300s)."},
};

}  // namespace

std::span<const OptionSpec<CollectiveOptions>> CollectiveOptions::Table() {
  return kCollectiveOptions;
}

absl::Status CollectiveOptions::Validate() const {
  if (chunk_bytes < 4096) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk_bytes=%d: must be at least 4096", chunk_bytes));
  }
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("local_rank=%d, local_size=%d: the local rank must be below the size",
                        local_rank, local_size));
  }
  if (check_exchange != "auto" && check_exchange != "direct" && check_exchange != "forwarded") {
    return absl::InvalidArgumentError(
        absl::StrFormat("check_exchange=%s: must be auto, direct or forwarded", check_exchange));
  }
  if (workers < 1 || workers > 64) {
    return absl::InvalidArgumentError(absl::StrFormat("workers=%d: must be 1..64", workers));
  }
  if (waiter_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("waiter_grace must not be negative");
  }
  if (small_message_bytes < 0) {
    return absl::InvalidArgumentError("small_message_bytes must not be negative");
  }
  return absl::OkStatus();
}

}  // namespace hmc
