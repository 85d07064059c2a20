#ifndef HMC_TRANSPORTS_TCP_STREAM_ADAPTER_H_
#define HMC_TRANSPORTS_TCP_STREAM_ADAPTER_H_

#include <array>
#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace hmc {

// Streams are adapted per message-size class, by factors of 4 from kAdaptMinBytes: the best count
// for a run of 512 KiB segments (an 8 MiB all-reduce) is not the best for 2 MiB ones (256 MiB):
// short transfers spend more of their time in slow start, where many streams burst into a
// shallow queue together. Smaller messages (probe chunks, control-sized sends) are not adapted.
inline constexpr uint64_t kAdaptMinBytes = 256 << 10;
inline constexpr int kSizeClasses = 4;  // 256 KiB-1 MiB, 1-4 MiB, 4-16 MiB, 16 MiB and more.

// The size class of a message of `bytes`, or -1 below kAdaptMinBytes.
int SizeClassOf(uint64_t bytes);

// Finds a stream count for one class of messages on one link by trying counts and keeping what
// the link's own transfers carry fastest. It starts at the count the sender uses. From below every
// connection it tries every connection first: where that gains kGain it stays there, and re-checks
// do not take it down; otherwise it climbs from the start, ×1.5 while the rate grows by kGain, or
// comes down ÷1.5 while the rate stays within kHold of the best seen (fewer streams: less burst
// into shallow queues, less per-stream overhead), and settles. From every connection (where a long
// link starts, collectives/link_probe.cc) it settles at once, and from its first re-check comes
// down ÷1.5 only while fewer streams gain kGain both on the count above, measured before them, and
// on that count measured again after them (kConfirm: a trial measured later finds warmer streams,
// so an order that always measures fewer last would favour them). Settled, it tries again every
// kSettledSamples samples (steps of 1.5 from where it stands), and starts over at once when
// kDropSamples samples in a row fall below kDrop of the best (the path changed).
//
// Why the rules lean to more streams: a ring's link carries what its upstream link feeds it, so
// samples of one count vary about 2x (multicloud-us-policed × 0.1, 8 MiB: 147–908 Mbit/s in a row
// from 32 streams on one link; US+EU at 256 MiB: 200–400 ms of the kernel's own arrivals varied
// as much), and a trial of two samples cannot tell 21 streams from 32 within 3%. A climb that came
// down while fewer held "within 3%" walked 32 → 21 → 14 → 21 through every run, 1.4x slower than 32
// fixed streams, and one that started over on a single slow sample walked a settled top down to
// 9–14; on every shipped WAN topology 16–32 fixed streams were fastest (perf/RESULTS.md, "Adaptive
// streams" and the sections after it). The first sample of a count above the current one is
// dropped: the streams it adds start cold (slow start from an initial window), and timed at once
// they make every climb look useless; climbing by ×1.5 alone stopped at 11–17 where 32 carried 1.5x
// more.
class StreamClimber {
 public:
  static constexpr int kTrialSamples = 2;
  static constexpr int kSettledSamples = 16;
  static constexpr double kGain = 1.08;
  static constexpr double kHold = 0.97;
  static constexpr double kDrop = 0.7;
  static constexpr int kDropSamples = 4;
  static constexpr int kForeignSamples = 3;

  explicit StreamClimber(int max_streams) : max_streams_(max_streams) {}

  // A rate (any unit) measured while the sender used `streams`. Returns the count to ask the
  // sender for. Samples of another count than the one under test are ignored: those of the count
  // the climb stands on or of the one asked for before (messages the sender had queued before it
  // heard the last request) quietly; kForeignSamples in a row of any other count mean the sender
  // chose a count of its own (a new probe), and the climb starts again from it.
  int Observe(int streams, double rate);

 private:
  enum class Phase { kBaseline, kTop, kUp, kDown, kConfirm, kSettled };
  void Try(Phase phase, int streams);
  // A new climb from `from`, the count the sender uses.
  void StartOver(int from);
  // What a trial's rate (`trial`) means in the phase it was taken in: the next count to try.
  void Judge(double trial);
  void Settle();
  // Fewer streams did not gain: settles where it stands (for good, where that is the top).
  void SettleAboveFewer();
  void DownOrSettle();
  // One step up where the top is not reached yet, else `otherwise`.
  void UpOr(void (StreamClimber::*otherwise)());
  void StandOnWanted(double trial);  // The count under test beat the one stood on.
  double TrialRate() const;  // The lower of the trial's samples: one lucky sample does not win.

  const int max_streams_;
  int current_ = 0;       // The count the climb stands on; 0 until the first sample.
  int wanted_ = 0;        // Under test, or current_ when settled.
  int asked_before_ = 0;  // wanted_ before its last change.
  Phase phase_ = Phase::kBaseline;
  double best_ = 0;          // The rate at current_ (the best of its trials).
  bool climbed_ = false;     // This climb moved up at least once.
  bool top_tried_ = false;   // Every connection was tried since the climb (re)started.
  bool top_gained_ = false;  // And gained kGain, or held against fewer: the climb stays there.
  bool from_top_ = false;    // This climb started on every connection.
  int to_skip_ = 0;          // Samples of wanted_ still to drop (cold streams).
  int foreign_ = 0;          // Samples in a row of a count not under test.
  int low_in_row_ = 0;       // Settled samples in a row below kDrop of the best.
  std::array<double, kTrialSamples> samples_{};
  int taken_ = 0;
  double fewer_rate_ = 0;  // The trial of asked_before_'s fewer streams, awaiting kConfirm.
};

// Turns the arrivals of one link's messages into rate samples of the link while it had a backlog:
// only a message whose first byte arrived before the previous message's last byte, or within
// kBacklogGap after it (over one stream, stripes of queued messages follow each other), counts,
// with its bytes over the time from that last byte to its own. A message that found the link idle
// opens a run but does not count: its time holds the sender's gap (what fed it: in a ring, the link
// before) and the ramp-up after idle, which say nothing of how many streams the link wants, and
// would make samples of the same count differ by far more than the counts do. A sample is
// kMessagesPerSample counted messages, and at least kRoundTripsPerSample round trips of the link
// (shorter samples of a long path are mostly TCP's sawtooth), that all came over the same number
// of streams.
class ArrivalSampler {
 public:
  static constexpr int kMessagesPerSample = 4;
  static constexpr int kRoundTripsPerSample = 2;
  static constexpr absl::Duration kBacklogGap = absl::Milliseconds(1);
  struct Sample {
    int streams;
    double bytes_per_second;
  };
  // `round_trip`: the link's (zero while unknown).
  std::optional<Sample> Add(absl::Time first_byte, absl::Time last_byte, uint64_t bytes,
                            int streams, absl::Duration round_trip = absl::ZeroDuration());

 private:
  int streams_ = 0;
  int messages_ = 0;
  uint64_t bytes_ = 0;
  absl::Duration busy_;
  absl::Time busy_until_ = absl::InfinitePast();
};

// The receiving side of one link: per size class, samples the arrivals and climbs. Returns a
// count for the sender when a class's wanted count changes.
class StreamAdapter {
 public:
  explicit StreamAdapter(int max_streams);
  struct Request {
    int size_class;
    int streams;
  };
  std::optional<Request> Arrived(absl::Time first_byte, absl::Time last_byte, uint64_t bytes,
                                 int streams, absl::Duration round_trip);

 private:
  struct PerClass {
    ArrivalSampler sampler;
    StreamClimber climber;
    int asked = 0;  // What the sender was last asked for.
  };
  std::array<std::optional<PerClass>, kSizeClasses> classes_;
  const int max_streams_;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_STREAM_ADAPTER_H_
