#ifndef HMC_COLLECTIVES_STREAM_PROBE_H_
#define HMC_COLLECTIVES_STREAM_PROBE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hmc {

class Channel;
class CommunicatorImpl;
struct Group;

// How many of its parallel connections per peer a communicator spreads sends over, and what the
// probe at creation measured to choose it (HMC_STREAMS=0). On a wide-area path one TCP stream is
// capped by its window over the round trip (the reference measurement: 211 Mbit/s on a path that
// carries 6 Gbit/s with 40 streams); on a LAN or through a loaded host more streams only add
// overhead. So each rank measures its incoming ring link as the ring uses it, every link of a
// class at once, first through one stream and then through all of them, and asks for enough
// streams to reach 90% of what all of them carried: ceil(0.9 · all / one). Links come in two
// classes, long (a round trip of kLongLinkRttMs or more: wide-area paths, where streams pay) and
// short (a LAN, a zone: one or two streams fill them, and more only crowd the NIC's queue). The
// classes are measured one after the other: a short link at full rate fills its sender's NIC
// queue, and the acknowledgements of the long link that the same rank receives wait in it
// (multicloud-us × 0.05: 32 streams into GC-0, whose own outgoing link stays in its zone, read
// 144-283 Mbit/s beside the flood and 329-336 without it; perf/RESULTS.md item 8). Each class uses
// the largest choice among its ring links, and a class without a probed ring link uses the group's.
struct StreamChoice {
  int streams = 1;        // Connections each send spreads over: the largest choice of any link.
  int long_streams = 1;   // On links of kLongLinkRttMs or more, once their round trip is known.
  int short_streams = 1;  // On the others.
  bool probed = false;    // False where streams was set, or no link leaves the host.
  // This rank's incoming ring link (from rank - 1): its round trip, and when it was probed, its
  // rates.
  double link_rtt_ms = 0;
  double one_stream_mbit = 0;
  double all_streams_mbit = 0;  // Through every connection (max_streams).
  int connections = 0;
  int link_choice = 0;
  absl::Duration window;  // Time each measurement of the incoming link's class sent for.
};

// Round trip from which a link is long: its messages are striped, and it takes long_streams.
inline constexpr double kLongLinkRttMs = 10;

// Streams used where no link of the ring leaves the host: local peers pull large messages in one
// copy, so streams only carry small ones.
inline constexpr int kLocalStreams = 4;

// The streams a link needs to carry 90% of `all_mbit` when one stream carried `one_mbit`; all of
// them where `all_mbit` grew about linearly with the streams (half of max_streams times `one_mbit`
// or more): such a path caps each flow, and had more to give.
int StreamsToReach(double one_mbit, double all_mbit, int max_streams);

// The streams of each link class from every ring link's choice (0: local, not probed) and round
// trip, ms: {long, short}.
std::pair<int, int> StreamsByLinkClass(const std::vector<int64_t>& choices,
                                       const std::vector<double>& rtt_ms);

// Every call of these is made in group `g` (a probe's steps all belong to one epoch).
// The fastest of `pings` round trips with `peer`, which must call this for this rank at the same
// time: both sides ping first and then answer the other's ping, so each answer leaves as soon as
// its ping arrives and the time is this link's alone (a ring of pings would wait on its slowest
// link).
absl::StatusOr<absl::Duration> FastestRoundTrip(CommunicatorImpl& comm,
                                                const std::shared_ptr<const Group>& g, int peer,
                                                int pings);
// The pings both probes take per link: the fastest of five is the link's own round trip, not a
// moment's queue.
inline constexpr int kProbePings = 5;

// Bytes received over time, as the probe's receiver sees them. The rate leaves out the first 40%
// of the time between the first and the last arrival, which TCP spends in slow start.
class RateMeter {
 public:
  explicit RateMeter(absl::Time start) : start_(start) {}
  void Arrived(absl::Time when, uint64_t bytes);
  double Mbit() const;

 private:
  absl::Time start_;
  std::vector<std::pair<absl::Time, uint64_t>> arrivals_;
};

// Probe sends waiting in this process per stream. The kernel's socket buffers carry the
// bandwidth-delay product; more here would only lengthen the drain after the window closes.
inline constexpr size_t kProbeChunksPerStream = 2;

// Probe traffic, shared by the streams probe and the link probe, over point-to-point messages:
// small chunks (each on one stream, and quick to drain from a slow link when the window closes).
// The sender streams chunks to `peer` for `window`, at most `depth` in flight (none at all where
// `marker_only`), then an end marker; the receiver takes them up to the marker and returns the
// rate a RateMeter saw of the bytes `link` (the channel from `peer`) read, Mbit/s.
absl::Status SendProbeChunks(CommunicatorImpl& comm, const std::shared_ptr<const Group>& g,
                             int peer, absl::Duration window, size_t depth, bool marker_only);
absl::StatusOr<double> ReceiveProbeChunks(CommunicatorImpl& comm,
                                          const std::shared_ptr<const Group>& g, int peer,
                                          const Channel& link);

// How long both probes measure a rate: twenty round trips of the longest link measured, long
// enough to leave slow start behind, at most 2 s, and at least `floor` (each probe's own: a
// class of links inside a zone needs half a second to read its rate, stream_probe.cc).
absl::Duration ProbeWindow(absl::Duration longest_rtt, absl::Duration floor);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_STREAM_PROBE_H_
