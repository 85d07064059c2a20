#include "collectives/link_probe.h"

#include <algorithm>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "collectives/communicator_impl.h"
#include "collectives/stream_probe.h"
#include "collectives/tuner.h"

namespace hmc {
namespace {

constexpr uint64_t kLongLinkStripeMinBytes = 16 << 10;
// How long one wait for the members' rows of links lasts before the epoch is looked at again.
constexpr absl::Duration kRowWait = absl::Seconds(1);

}  // namespace

std::vector<double> LinkMatrix::PeerBandwidth() const {
  std::vector<double> out(size, 0.0), in(size, 0.0), both(size, 0.0);
  for (int a = 0; a < size; ++a) {
    for (int b = 0; b < size; ++b) {
      out[a] += rate(a, b);
      in[b] += rate(a, b);
    }
  }
  for (int r = 0; r < size; ++r) both[r] = std::min(out[r], in[r]);
  return both;
}

double LinkMatrix::SlowestRate(const std::vector<int>& zone_of, bool across_zones) const {
  double slowest = 0;
  for (int a = 0; a < size; ++a) {
    for (int b = 0; b < size; ++b) {
      if (a == b || rate(a, b) <= 0 || (zone_of[a] != zone_of[b]) != across_zones) continue;
      slowest = slowest == 0 ? rate(a, b) : std::min(slowest, rate(a, b));
    }
  }
  return slowest;
}

double LinkMatrix::LongestRtt() const {
  return rtt_ms.empty() ? 0 : *std::max_element(rtt_ms.begin(), rtt_ms.end());
}

std::string LinkMatrix::SerializeRow(int rank) const {
  std::vector<std::string> fields;
  for (int from = 0; from < size; ++from) {
    fields.push_back(absl::StrFormat("%.6g/%.6g", rtt(from, rank), rate(from, rank)));
  }
  return absl::StrJoin(fields, ",");
}

absl::Status LinkMatrix::ParseRow(int rank, absl::string_view text) {
  const std::vector<absl::string_view> fields = absl::StrSplit(text, ',');
  if (static_cast<int>(fields.size()) != size) {
    return absl::DataLossError(absl::StrFormat("link row of rank %d has %d entries, expected %d",
                                               rank, fields.size(), size));
  }
  for (int from = 0; from < size; ++from) {
    const std::vector<absl::string_view> pair = absl::StrSplit(fields[from], '/');
    double rtt = 0, rate = 0;
    if (pair.size() != 2 || !absl::SimpleAtod(pair[0], &rtt) || !absl::SimpleAtod(pair[1], &rate)) {
      return absl::DataLossError(
          absl::StrFormat("link row of rank %d: bad entry '%s'", rank, fields[from]));
    }
    rtt_ms[from * size + rank] = rtt;
    mbit[from * size + rank] = rate;
  }
  return absl::OkStatus();
}

std::string LinkMatrix::ToTable() const {
  std::string text;
  for (const bool rates : {false, true}) {
    absl::StrAppend(&text, rates ? "# Mbit/s while every link carried data (row: sender; "
                                   "-: inside a host, not measured)\n"
                                 : "# round trip, ms (row: sender)\n");
    absl::StrAppend(&text, "#  from\\to");
    for (int to = 0; to < size; ++to) absl::StrAppend(&text, absl::StrFormat(" %8d", to));
    absl::StrAppend(&text, "\n");
    for (int from = 0; from < size; ++from) {
      absl::StrAppend(&text, absl::StrFormat("# %8d", from));
      for (int to = 0; to < size; ++to) {
        const double v = rates ? rate(from, to) : rtt(from, to);
        absl::StrAppend(&text, from == to || (rates && v <= 0) ? absl::StrFormat(" %8s", "-")
                                                               : absl::StrFormat(" %8.1f", v));
      }
      absl::StrAppend(&text, "\n");
    }
  }
  return text;
}

absl::Status CommunicatorImpl::ProbeLinks(const std::shared_ptr<const Group>& g) {
  const int n = g->size();
  LinkMatrix matrix;
  matrix.size = n;
  matrix.rtt_ms.assign(n * n, 0.0);
  matrix.mbit.assign(n * n, 0.0);
  if (absl::Status s = MeasureRoundTrips(g, matrix); !s.ok()) return s;
  StripeByLinkClass(*g, matrix);
  if (absl::Status s = MeasureRates(g, matrix); !s.ok()) return s;
  absl::StatusOr<double> speed = SlowestAutoCodecSpeed(g);
  if (!speed.ok()) return speed.status();
  matrix.auto_codec_bytes_per_s = *speed;
  if (absl::Status s = ShareLinkRows(g, matrix); !s.ok()) return s;
  {
    // Every member's row arrived, so every member that gets here holds this matrix: it stands
    // even where the membership changed since (were a member to drop it while another kept it,
    // one would measure again while the other went on with its calls, and neither call would
    // match). The newer epoch's links follow from it, as Adopt derives them.
    MutexLock lock(&mu_);
    probe_ = LinkProbeRecord{g->ids, matrix};
    group_ = group_->epoch == g->epoch ? g->WithLinks(std::move(matrix))
                                       : group_->WithWorldLinks(WorldLinks(probe_, world_table_));
  }
  return RecordProbe();
}

absl::Status CommunicatorImpl::MeasureRoundTrips(const std::shared_ptr<const Group>& g,
                                                 LinkMatrix& matrix) {
  // With each peer at once, a thread per peer.
  const int n = g->size(), self = g->rank;
  std::vector<absl::Status> errors(n);
  std::vector<std::thread> threads;
  for (int p = 0; p < n; ++p) {
    if (p == self) continue;
    threads.emplace_back([&, p] {
      absl::StatusOr<absl::Duration> rtt = FastestRoundTrip(*this, g, p, kProbePings);
      if (rtt.ok()) {
        matrix.rtt_ms[p * n + self] = absl::ToDoubleMilliseconds(*rtt);
      } else {
        errors[p] = rtt.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void CommunicatorImpl::StripeByLinkClass(const Group& g, const LinkMatrix& matrix) {
  // Over a long link every message is striped: on one connection it would be held to one
  // window per round trip (a sender's choice; receivers take stripes from any connection). Each
  // link takes its class's streams, where the streams probe chose them; with adaptive streams a
  // long link starts on every connection, and its receiver's climb judges them against fewer. The
  // probe reads a steady rate, which short transfers never reach: at 8 MiB the fastest fixed count
  // was 16–32 on every swept WAN topology, where the probe chose 4–5 streams (multicloud-us-
  // policed) or 9–10 (US+EU), and a climb from the probe's count spent the first calls on it and
  // on cold streams (perf/RESULTS.md, "Adaptive streams from every connection").
  for (int p = 0; p < g.size(); ++p) {
    if (p == g.rank) continue;
    ParallelStreams* streams = g.channels[p]->parallel_streams();
    if (streams == nullptr) continue;
    const bool long_link = matrix.rtt(p, g.rank) >= kLongLinkRttMs;
    if (long_link) streams->SetStripeMinBytes(kLongLinkStripeMinBytes);
    if (stream_choice_.probed && !g.channels[p]->local()) {
      const int long_streams =
          options_.adapts_streams() ? options_.connections_per_peer() : stream_choice_.long_streams;
      streams->SetActiveStreams(long_link ? long_streams : stream_choice_.short_streams);
    }
  }
}

absl::Status CommunicatorImpl::MeasureRates(const std::shared_ptr<const Group>& g,
                                            LinkMatrix& matrix) {
  const int n = g->size(), self = g->rank;
  const std::vector<std::shared_ptr<Channel>>& channels = g->channels;
  // At least a tenth of a second: this probe runs at every creation (the streams probe, which
  // reads one stream's rate inside a zone, needs half a second).
  double window_s = absl::ToDoubleSeconds(
      ProbeWindow(absl::Milliseconds(matrix.LongestRtt()), absl::Milliseconds(100)));
  const Buffer window_buffer{&window_s, 1, DType::kF64};
  if (absl::Status s = AllReduce(g, window_buffer, window_buffer, ReduceOp::kMax)->Wait();
      !s.ok()) {
    return s;
  }
  // Every rank streams to every peer at once for the window, a sender and a receiver thread per
  // peer; links inside the host only send their end marker.
  const absl::Duration window = absl::Seconds(window_s);
  std::vector<absl::Status> send_errors(n), receive_errors(n);
  std::vector<std::thread> threads;
  for (int p = 0; p < n; ++p) {
    if (p == self) continue;
    threads.emplace_back([&, p] {
      send_errors[p] =
          SendProbeChunks(*this, g, p, window, kProbeChunksPerStream * ActiveStreams(*channels[p]),
                          channels[p]->local());
    });
    threads.emplace_back([&, p] {
      absl::StatusOr<double> rate = ReceiveProbeChunks(*this, g, p, *channels[p]);
      if (!rate.ok()) {
        receive_errors[p] = rate.status();
      } else if (!channels[p]->local()) {
        matrix.mbit[p * n + self] = *rate;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int p = 0; p < n; ++p) {
    if (!receive_errors[p].ok()) return receive_errors[p];
    if (!send_errors[p].ok()) return send_errors[p];
  }
  return absl::OkStatus();
}

absl::StatusOr<double> CommunicatorImpl::SlowestAutoCodecSpeed(
    const std::shared_ptr<const Group>& g) {
  // The slowest rank's, so that every rank makes the same choice.
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(kAutoCodec);
  if (!codec.ok()) return codec.status();
  std::vector<float> values(1 << 20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977) - 488.0f;
  std::vector<uint8_t> encoded((*codec)->MaxEncodedBytes(values.size()));
  double speed = 0;
  for (int i = 0; i < 3; ++i) {
    const absl::Time start = absl::Now();
    (*codec)->Encode(values.data(), values.size(), encoded.data());
    speed = std::max(speed, values.size() * sizeof(float) /
                                std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start)));
  }
  const Buffer speed_buffer{&speed, 1, DType::kF64};
  if (absl::Status s = AllReduce(g, speed_buffer, speed_buffer, ReduceOp::kMin)->Wait(); !s.ok()) {
    return s;
  }
  return speed;
}

absl::Status CommunicatorImpl::ShareLinkRows(const std::shared_ptr<const Group>& g,
                                             LinkMatrix& matrix) {
  const int n = g->size(), self = g->rank;
  if (coordinator_ == nullptr) {
    std::vector<double> mine(2 * n), all(2 * n * n);
    for (int from = 0; from < n; ++from) {
      mine[from] = matrix.rtt(from, self);
      mine[n + from] = matrix.rate(from, self);
    }
    absl::Status s = AllGather(g, Buffer{mine.data(), mine.size(), DType::kF64},
                               Buffer{all.data(), all.size(), DType::kF64})
                         ->Wait();
    if (!s.ok()) return s;
    for (int to = 0; to < n; ++to) {
      for (int from = 0; from < n; ++from) {
        matrix.rtt_ms[from * n + to] = all[2 * n * to + from];
        matrix.mbit[from * n + to] = all[2 * n * to + n + from];
      }
    }
    return absl::OkStatus();
  }
  // Keyed by the epoch and the probe's count within it, which every member of the epoch agrees
  // on (a rank that joined counts from its first epoch, as the others do there).
  if (probe_epoch_ != g->epoch) {
    probe_epoch_ = g->epoch;
    probes_in_epoch_ = 0;
  }
  const std::string prefix =
      absl::StrFormat("hmc/links/%s/%d.%d/", options_.world_id, g->epoch, probes_in_epoch_++);
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  if (absl::Status s =
          coordinator_->Put(absl::StrCat(prefix, self), matrix.SerializeRow(self), deadline);
      !s.ok()) {
    return s;
  }
  // Every row, this rank's too, is read back from its text, so all ranks hold the same bits; all
  // in one round trip to the coordinator once the rows are there. A member lost before it sent
  // its row never will: the epoch that removes it ends the wait (looked at between waits of a
  // second), not Create's deadline.
  std::vector<std::string> keys;
  for (int r = 0; r < n; ++r) keys.push_back(absl::StrCat(prefix, r));
  absl::Status missing;
  for (int64_t wait = 0; wait <= options_.connect_timeout / kRowWait; ++wait) {
    const std::vector<absl::StatusOr<std::string>> rows =
        coordinator_->GetMany(keys, std::min(deadline, absl::Now() + kRowWait));
    missing = absl::OkStatus();
    for (const absl::StatusOr<std::string>& row : rows) {
      if (row.ok()) continue;
      if (!absl::IsDeadlineExceeded(row.status())) return row.status();
      missing = row.status();
    }
    if (missing.ok()) {
      for (int r = 0; r < n; ++r) {
        if (absl::Status s = matrix.ParseRow(r, *rows[r]); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    if (const uint32_t now = epoch(); now != g->epoch) {
      return MembershipChangedError(g->epoch, now, "a member's links never came");
    }
    if (absl::Now() >= deadline) break;
  }
  return missing;
}

absl::Status CommunicatorImpl::RecordProbe() {
  std::shared_ptr<const Group> g = group();
  if (coordinator_ == nullptr || g->rank != 0) return absl::OkStatus();
  std::string record;
  {
    MutexLock lock(&mu_);
    record = probe_.Serialize();
  }
  return coordinator_->Put(LinkProbeKey(options_.world_id), record,
                           absl::Now() + options_.connect_timeout);
}

}  // namespace hmc
