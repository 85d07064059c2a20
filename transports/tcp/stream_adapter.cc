#include "transports/tcp/stream_adapter.h"

#include <algorithm>
#include <cmath>

namespace hmc {
namespace {

int Up(int streams, int max_streams) {
  return std::min(max_streams, std::max(streams + 1, static_cast<int>(std::lround(streams * 1.5))));
}

int Down(int streams) {
  return std::max(1, std::min(streams - 1, static_cast<int>(std::lround(streams / 1.5))));
}

}  // namespace

int SizeClassOf(uint64_t bytes) {
  if (bytes < kAdaptMinBytes) return -1;
  int size_class = 0;
  for (uint64_t rest = bytes / kAdaptMinBytes; rest >= 4 && size_class < kSizeClasses - 1;
       rest /= 4) {
    ++size_class;
  }
  return size_class;
}

void StreamClimber::Try(Phase phase, int streams) {
  phase_ = phase;
  if (streams != wanted_) asked_before_ = wanted_;
  to_skip_ = phase == Phase::kUp || phase == Phase::kTop || phase == Phase::kConfirm ? 1 : 0;
  wanted_ = streams;
  taken_ = 0;
}

double StreamClimber::TrialRate() const {
  return *std::min_element(samples_.begin(), samples_.end());
}

void StreamClimber::StartOver(int from) {
  current_ = std::clamp(from, 1, max_streams_);
  from_top_ = current_ == max_streams_;
  top_tried_ = from_top_;
  top_gained_ = false;
  best_ = 0;  // Nothing measured yet: no sample is below it.
  low_in_row_ = 0;
  // From every connection it settles first, and its first re-check tries fewer: the streams are
  // cold now (idle since the probes, or the path just changed), and a trial on them would favour
  // whatever count is measured after them (US+EU policed, 8 MiB: the first samples of 32 read
  // 138–180 Mbit/s, 318–687 a call later).
  Try(from_top_ ? Phase::kSettled : Phase::kBaseline, current_);
}

int StreamClimber::Observe(int streams, double rate) {
  if (current_ == 0) StartOver(streams);
  if (streams != wanted_) {
    if (streams == current_ || streams == asked_before_)
      return wanted_;  // Sent before the request.
    if (++foreign_ < kForeignSamples) return wanted_;
    StartOver(streams);
  }
  foreign_ = 0;
  if (to_skip_ > 0) {
    --to_skip_;
    return wanted_;
  }
  if (phase_ == Phase::kSettled) {
    low_in_row_ = rate < best_ * kDrop ? low_in_row_ + 1 : 0;
    if (low_in_row_ >= kDropSamples) {
      StartOver(current_);  // The path changed: the top may pay again, or no longer.
    } else if (++taken_ >= kSettledSamples) {
      Try(Phase::kBaseline, current_);
    }
    return wanted_;
  }
  samples_[taken_++] = rate;
  if (taken_ < kTrialSamples) return wanted_;
  Judge(TrialRate());
  return wanted_;
}

void StreamClimber::Settle() { Try(Phase::kSettled, current_); }

void StreamClimber::SettleAboveFewer() {
  top_gained_ = current_ == max_streams_;  // The top held against fewer.
  Settle();
}

void StreamClimber::DownOrSettle() {
  if (current_ > 1) {
    Try(Phase::kDown, Down(current_));
  } else {
    Settle();
  }
}

void StreamClimber::UpOr(void (StreamClimber::*otherwise)()) {
  if (current_ < max_streams_) {
    Try(Phase::kUp, Up(current_, max_streams_));
  } else {
    (this->*otherwise)();
  }
}

void StreamClimber::StandOnWanted(double trial) {
  current_ = wanted_;
  best_ = trial;
  climbed_ = true;
}

void StreamClimber::Judge(double trial) {
  switch (phase_) {
    case Phase::kBaseline:
      best_ = trial;
      climbed_ = false;
      if (!top_tried_ && current_ < max_streams_) {
        top_tried_ = true;
        Try(Phase::kTop, max_streams_);
      } else if (top_gained_ && current_ == max_streams_) {
        Settle();  // A re-check would come down on noise (the top gained when it was tried).
      } else {
        UpOr(&StreamClimber::DownOrSettle);
      }
      break;
    case Phase::kTop:
      if (trial > best_ * kGain) {
        StandOnWanted(trial);
        top_gained_ = true;
        Settle();  // Not down: see the class comment.
      } else if (Up(current_, max_streams_) == max_streams_) {
        DownOrSettle();  // One step up is the top just measured.
      } else {
        UpOr(&StreamClimber::DownOrSettle);  // A peak between here and the top, or below here.
      }
      break;
    case Phase::kUp:
      if (trial > best_ * kGain) {
        StandOnWanted(trial);
        UpOr(&StreamClimber::Settle);
      } else if (climbed_) {
        Settle();  // The count below was measured slower on the way up.
      } else {
        DownOrSettle();
      }
      break;
    case Phase::kDown:
      if (trial < best_ * (from_top_ ? kGain : kHold)) {
        SettleAboveFewer();
      } else if (from_top_) {
        // Measured after the count above, fewer may only have found warmer streams: the count
        // above is measured again, and fewer must gain on both trials.
        fewer_rate_ = trial;
        Try(Phase::kConfirm, current_);
      } else {
        current_ = wanted_;
        best_ = std::max(best_, trial);
        DownOrSettle();
      }
      break;
    case Phase::kConfirm:
      best_ = std::max(best_, trial);
      if (fewer_rate_ >= best_ * kGain) {
        current_ = asked_before_;  // The fewer streams, asked for before the confirmation.
        best_ = fewer_rate_;
        DownOrSettle();
      } else {
        SettleAboveFewer();
      }
      break;
    case Phase::kSettled:
      break;
  }
}

std::optional<ArrivalSampler::Sample> ArrivalSampler::Add(absl::Time first_byte,
                                                          absl::Time last_byte, uint64_t bytes,
                                                          int streams, absl::Duration round_trip) {
  if (streams != streams_) {
    *this = ArrivalSampler();
    streams_ = streams;
  }
  // Called in the order messages finish.
  const bool backlogged = first_byte <= busy_until_ + kBacklogGap;
  const absl::Time previous_end = busy_until_;
  busy_until_ = std::max(busy_until_, last_byte);
  if (!backlogged) return std::nullopt;
  busy_ += busy_until_ - previous_end;
  bytes_ += bytes;
  if (++messages_ < kMessagesPerSample || busy_ <= absl::ZeroDuration() ||
      busy_ < kRoundTripsPerSample * round_trip) {
    return std::nullopt;
  }
  const Sample sample{streams_, static_cast<double>(bytes_) / absl::ToDoubleSeconds(busy_)};
  messages_ = 0;
  bytes_ = 0;
  busy_ = absl::ZeroDuration();
  return sample;
}

StreamAdapter::StreamAdapter(int max_streams) : max_streams_(max_streams) {}

std::optional<StreamAdapter::Request> StreamAdapter::Arrived(absl::Time first_byte,
                                                             absl::Time last_byte, uint64_t bytes,
                                                             int streams,
                                                             absl::Duration round_trip) {
  const int size_class = SizeClassOf(bytes);
  if (size_class < 0) return std::nullopt;
  std::optional<PerClass>& c = classes_[size_class];
  if (!c.has_value()) c.emplace(PerClass{ArrivalSampler(), StreamClimber(max_streams_), streams});
  const std::optional<ArrivalSampler::Sample> sample =
      c->sampler.Add(first_byte, last_byte, bytes, streams, round_trip);
  if (!sample.has_value()) return std::nullopt;
  const int wanted = c->climber.Observe(sample->streams, sample->bytes_per_second);
  if (wanted == c->asked) return std::nullopt;
  c->asked = wanted;
  return Request{size_class, wanted};
}

}  // namespace hmc
