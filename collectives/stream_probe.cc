#include "collectives/stream_probe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <tuple>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "collectives/communicator_impl.h"

namespace hmc {
namespace {

// Below stripe_min_bytes (each chunk takes one stream), and small, so that what is in flight when
// the window closes (two per stream) drains quickly even from a slow link.
constexpr size_t kChunkBytes = 64 << 10;
constexpr double kSlowStartShare = 0.4;
// All streams carried at least this share of max_streams times one stream's rate: linear scaling.
constexpr double kLinearShare = 0.5;
// How often the receiver reads the link's byte counter while a chunk is late, and for how many
// reads (a chunk later than that is a stalled link, not a measurement).
constexpr absl::Duration kReadEvery = absl::Milliseconds(2);
constexpr int kMaxReadsPerChunk = 5000;

}  // namespace

absl::Duration ProbeWindow(absl::Duration longest_rtt, absl::Duration floor) {
  return std::clamp(longest_rtt * 20, floor, absl::Seconds(2));
}

int StreamsToReach(double one_mbit, double all_mbit, int max_streams) {
  if (one_mbit <= 0) return max_streams;
  // Where every stream still added about as much as the first, the path caps each flow and the
  // connections ran out before it filled: more of them is all that helps.
  if (all_mbit >= kLinearShare * max_streams * one_mbit) return max_streams;
  const int wanted = static_cast<int>(std::ceil(0.9 * all_mbit / one_mbit - 1e-9));
  return std::clamp(wanted, 1, max_streams);
}

std::pair<int, int> StreamsByLinkClass(const std::vector<int64_t>& choices,
                                       const std::vector<double>& rtt_ms) {
  int64_t any = 0, long_links = 0, short_links = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    any = std::max(any, choices[i]);
    int64_t& of_class = rtt_ms[i] >= kLongLinkRttMs ? long_links : short_links;
    of_class = std::max(of_class, choices[i]);
  }
  return {static_cast<int>(long_links > 0 ? long_links : any),
          static_cast<int>(short_links > 0 ? short_links : any)};
}

void RateMeter::Arrived(absl::Time when, uint64_t bytes) { arrivals_.emplace_back(when, bytes); }

double RateMeter::Mbit() const {
  if (arrivals_.empty()) return 0;
  const absl::Time first = arrivals_.front().first;
  const absl::Time end = arrivals_.back().first;
  if (end <= first) {  // One arrival: all there is, over the whole window.
    return arrivals_.front().second * 8 / std::max(1e-9, absl::ToDoubleSeconds(end - start_)) / 1e6;
  }
  // The bytes that arrived after the cut, over the time since the last arrival before it.
  const absl::Time cut = first + (end - first) * kSlowStartShare;
  absl::Time from = first;
  uint64_t bytes = 0;
  for (const auto& [when, n] : arrivals_) {
    if (when <= cut) {
      from = when;
    } else {
      bytes += n;
    }
  }
  return bytes * 8 / absl::ToDoubleSeconds(end - from) / 1e6;
}

absl::Status SendProbeChunks(CommunicatorImpl& comm, const std::shared_ptr<const Group>& g,
                             int peer, absl::Duration window, size_t depth, bool marker_only) {
  static const std::vector<uint8_t> chunk(kChunkBytes, 0);
  static const std::vector<uint8_t> last = [] {
    std::vector<uint8_t> v(kChunkBytes, 0);
    v[0] = 1;
    return v;
  }();
  // The point-to-point API takes mutable buffers; sends only read them.
  auto send = [&](const std::vector<uint8_t>& bytes) {
    return comm.Send(g, Buffer{const_cast<uint8_t*>(bytes.data()), bytes.size(), DType::kU8}, peer);
  };
  absl::Status status;
  const absl::Time stop = absl::Now() + window;
  std::vector<std::shared_ptr<Work>> in_flight;
  while (!marker_only && absl::Now() < stop && status.ok()) {
    if (in_flight.size() >= depth) {
      status = in_flight.front()->Wait();
      in_flight.erase(in_flight.begin());
    }
    in_flight.push_back(send(chunk));
  }
  in_flight.push_back(send(last));
  for (auto& w : in_flight) {
    if (absl::Status s = w->Wait(); status.ok()) status = s;
  }
  return status;
}

absl::StatusOr<double> ReceiveProbeChunks(CommunicatorImpl& comm,
                                          const std::shared_ptr<const Group>& g, int peer,
                                          const Channel& link) {
  std::vector<uint8_t> received(kChunkBytes);
  RateMeter meter(absl::Now());
  uint64_t counted = link.stats().bytes_received;
  // Bytes are timed as the link reads them off its sockets, not as receives complete: receives
  // complete in sending order, and chunks that overtook a late one on another stream would count
  // only when it lands, so a window could read above the path. So the peer must send nothing
  // else large until this returns (the streams probe waits at a barrier between measurements).
  auto count_arrivals = [&] {
    const uint64_t now_received = link.stats().bytes_received;
    if (now_received > counted) meter.Arrived(absl::Now(), now_received - counted);
    counted = now_received;
  };
  for (bool done = false; !done;) {
    std::shared_ptr<Work> work =
        comm.Recv(g, Buffer{received.data(), received.size(), DType::kU8}, peer);
    for (int i = 0; i < kMaxReadsPerChunk && !work->done(); ++i) {
      (void)work->Wait(absl::Now() + kReadEvery);
      count_arrivals();
    }
    // Past the last read it waits as any receive does: until the chunk lands or the link fails.
    if (absl::Status s = work->Wait(); !s.ok()) return s;
    count_arrivals();
    done = received[0] == 1;
  }
  return meter.Mbit();
}

absl::StatusOr<absl::Duration> FastestRoundTrip(CommunicatorImpl& comm,
                                                const std::shared_ptr<const Group>& g, int peer,
                                                int pings) {
  auto wait = [](const std::shared_ptr<Work>& w) { return w->Wait(); };
  int64_t ping = 0, got = 0;
  absl::Duration fastest = absl::InfiniteDuration();
  for (int i = 0; i < pings; ++i) {
    const absl::Time start = absl::Now();
    auto sent = comm.Send(g, Buffer{&ping, 1, DType::kI64}, peer);
    absl::Status status = wait(comm.Recv(g, Buffer{&got, 1, DType::kI64}, peer));
    if (status.ok()) status = wait(comm.Send(g, Buffer{&ping, 1, DType::kI64}, peer));
    if (status.ok()) status = wait(comm.Recv(g, Buffer{&got, 1, DType::kI64}, peer));
    if (absl::Status s = wait(sent); status.ok()) status = s;
    if (!status.ok()) return status;
    fastest = std::min(fastest, absl::Now() - start);
  }
  return fastest;
}

absl::Status CommunicatorImpl::ProbeStreams(const std::shared_ptr<const Group>& g) {
  const int n = g->size();
  const int self = g->rank;  // This rank, in the group.
  const int prev = (self + n - 1) % n;
  // A link without parallel streams (UCX's) has nothing to choose, as a local one: it carries
  // only the measurements' end markers, and its receiver reports no choice.
  Channel& in = *g->channels[prev];
  const bool in_fixed = in.local() || in.parallel_streams() == nullptr;
  const int max_streams = options_.connections_per_peer();
  absl::StatusOr<std::vector<int64_t>> link_rtt_us = RingLinkRoundTrips(g);
  if (!link_rtt_us.ok()) return link_rtt_us.status();
  auto long_link_from = [&](int r) { return (*link_rtt_us)[r] >= kLongLinkRttMs * 1000; };

  // Each class for about twenty round trips of its longest link, long enough to leave slow start
  // behind, and for at least half a second: inside a zone twenty round trips are a few
  // milliseconds, and the emulated one zone read one stream at 20-24 Mbit/s of a 689 Mbit/s NIC in
  // 0.1 s (perf/RESULTS.md, item 8). Ranks whose outgoing link is of another class send their
  // end marker only.
  StreamChoice choice;
  double one = 0, all = 0;
  for (const bool long_class : {true, false}) {
    int64_t longest_us = -1;
    for (int r = 0; r < n; ++r) {
      if (long_link_from(r) == long_class) longest_us = std::max(longest_us, (*link_rtt_us)[r]);
    }
    if (longest_us < 0) continue;
    const absl::Duration window =
        ProbeWindow(absl::Microseconds(longest_us), absl::Milliseconds(500));
    const bool marker_only = long_link_from(self) != long_class;
    absl::StatusOr<double> one_stream = MeasureRingLink(g, marker_only, window, 1);
    if (!one_stream.ok()) return one_stream.status();
    absl::StatusOr<double> all_streams = MeasureRingLink(g, marker_only, window, max_streams);
    if (!all_streams.ok()) return all_streams.status();
    if (long_link_from(prev) == long_class) {
      one = *one_stream;
      all = *all_streams;
      choice.window = window;
    }
  }
  std::vector<double> rtt_ms(n);  // Of the link into rank r, as the choices are.
  for (int r = 0; r < n; ++r) rtt_ms[r] = (*link_rtt_us)[(r + n - 1) % n] / 1e3;
  choice.connections = max_streams;
  choice.link_rtt_ms = rtt_ms[self];
  if (!in_fixed) {
    choice.one_stream_mbit = one;
    choice.all_streams_mbit = all;
    choice.link_choice = StreamsToReach(one, all, max_streams);
  }
  return SetStreamsFromChoices(g, choice, rtt_ms);
}

absl::StatusOr<std::vector<int64_t>> CommunicatorImpl::RingLinkRoundTrips(
    const std::shared_ptr<const Group>& g) {
  // Each link is timed by its sender while its receiver answers (with two ranks the one link
  // serves both), then shared: every rank must put each link in the same class.
  const int n = g->size();
  const int next = (g->rank + 1) % n, prev = (g->rank + n - 1) % n;
  absl::StatusOr<absl::Duration> to_next;
  absl::Status answering_prev;
  {
    std::thread answer;
    if (prev != next) {
      answer = std::thread(
          [&] { answering_prev = FastestRoundTrip(*this, g, prev, kProbePings).status(); });
    }
    to_next = FastestRoundTrip(*this, g, next, kProbePings);
    if (answer.joinable()) answer.join();
  }
  if (!to_next.ok()) return to_next.status();
  if (!answering_prev.ok()) return answering_prev;
  int64_t mine = absl::ToInt64Microseconds(*to_next);
  std::vector<int64_t> link_rtt_us(n);  // Of the link from rank r to rank r + 1.
  if (absl::Status s = AllGather(g, Buffer{&mine, 1, DType::kI64},
                                 Buffer{link_rtt_us.data(), link_rtt_us.size(), DType::kI64})
                           ->Wait();
      !s.ok()) {
    return s;
  }
  return link_rtt_us;
}

absl::StatusOr<double> CommunicatorImpl::MeasureRingLink(const std::shared_ptr<const Group>& g,
                                                         bool marker_only, absl::Duration window,
                                                         int streams) {
  const int n = g->size();
  const int next = (g->rank + 1) % n, prev = (g->rank + n - 1) % n;
  Channel& out = *g->channels[next];
  ParallelStreams* out_streams = out.parallel_streams();
  const bool out_fixed = out.local() || out_streams == nullptr;
  if (!out_fixed) out_streams->SetActiveStreams(streams);
  absl::Status send_status;
  std::thread sender([&] {
    send_status = SendProbeChunks(*this, g, next, window, kProbeChunksPerStream * streams,
                                  marker_only || out_fixed);
  });
  absl::StatusOr<double> rate = ReceiveProbeChunks(*this, g, prev, *g->channels[prev]);
  sender.join();
  if (!rate.ok()) return rate.status();
  if (!send_status.ok()) return send_status;
  // The next measurement's chunks must not reach a receiver still waiting for this one's marker.
  if (absl::Status s = Barrier(g)->Wait(); !s.ok()) return s;
  return *rate;
}

absl::Status CommunicatorImpl::SetStreamsFromChoices(const std::shared_ptr<const Group>& g,
                                                     StreamChoice choice,
                                                     const std::vector<double>& rtt_ms) {
  int64_t link_choice = choice.link_choice;  // 0 where this rank's incoming link is fixed.
  std::vector<int64_t> choices(g->size());   // Of the link into rank r.
  if (absl::Status s = AllGather(g, Buffer{&link_choice, 1, DType::kI64},
                                 Buffer{choices.data(), choices.size(), DType::kI64})
                           ->Wait();
      !s.ok()) {
    return s;
  }
  const int max_streams = options_.connections_per_peer();
  const int64_t wanted = *std::max_element(choices.begin(), choices.end());
  choice.probed = wanted > 0;
  choice.streams = wanted > 0 ? static_cast<int>(wanted) : std::min(kLocalStreams, max_streams);
  std::tie(choice.long_streams, choice.short_streams) =
      wanted > 0 ? StreamsByLinkClass(choices, rtt_ms) : std::pair{choice.streams, choice.streams};
  // Each link gets its class's count once the link probe knows its round trip.
  for (const auto& channel : g->channels) {
    if (channel != nullptr && channel->parallel_streams() != nullptr) {
      channel->parallel_streams()->SetActiveStreams(choice.streams);
    }
  }
  stream_choice_ = choice;
  return absl::OkStatus();
}

}  // namespace hmc
