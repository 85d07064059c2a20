#include "collectives/state_transfer.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <future>
#include <memory>

#include "absl/strings/str_format.h"
#include "core/mutex.h"

namespace hmc {
namespace {

constexpr size_t kHashBytes = 32;
// A part's index travels in the tag's 20-bit segment field.
constexpr size_t kMaxParts = size_t{1} << 20;
// Steps of Phase::kState.
constexpr uint32_t kHashStep = 0;
constexpr uint32_t kRequestStep = 1;
constexpr uint32_t kPartStep = 2;

using Hash = std::array<uint8_t, kHashBytes>;

Hash HashPart(const SharedState& state, const StatePart& part) {
  Hash hash{};
  unsigned int length = 0;
  EVP_Digest(state.tensors[part.tensor].second.byte_data() + part.offset, part.bytes, hash.data(),
             &length, EVP_sha256(), nullptr);
  return hash;
}

uint8_t* PartData(const SharedState& state, const StatePart& part) {
  return state.tensors[part.tensor].second.byte_data() + part.offset;
}

// Requests and parts complete on transport threads, in any order; a transfer takes them in the
// order they complete. Shared with the completion callbacks, which may outlive a transfer that
// ended early (the context drains its requests later).
class Completions {
 public:
  struct Done {
    size_t key;  // The caller's: which request completed.
    absl::Status status;
  };
  // Queues `key` when `request` completes.
  static void Watch(const std::shared_ptr<Completions>& self, const RequestPtr& request,
                    size_t key) {
    request->Then([self, key](const absl::Status& status) {
      MutexLock lock(&self->mu_);
      self->done_.push_back(Done{key, status});
    });
  }
  // Queues `key` now (work finished on another thread).
  void Push(size_t key) {
    MutexLock lock(&mu_);
    done_.push_back(Done{key, absl::OkStatus()});
  }
  // The next completion, or DeadlineExceeded.
  absl::StatusOr<Done> Next(absl::Time deadline) {
    MutexLock lock(&mu_);
    auto any = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !done_.empty(); };
    if (!mu_.AwaitWithDeadline(absl::Condition(&any), deadline)) {
      return absl::DeadlineExceededError("the state transfer ran past the call's deadline");
    }
    Done d = std::move(done_.front());
    done_.pop_front();
    return d;
  }

 private:
  Mutex mu_;
  std::deque<Done> done_ ABSL_GUARDED_BY(mu_);
};

// A request lists at most this many part indexes; an empty one ends the transfer.
constexpr size_t kMaxAsk = 16;
// Parts a stale member keeps in flight from each holder: a round trip's worth of pipelining.
constexpr size_t kWindow = 2;

// A holder: serves the stale members' requests in the order they arrive (request k of a member
// has segment k), each with the parts it names, while another thread hashes every part; the list
// of hashes goes to each stale member as soon as it is ready.
absl::Status Serve(CollectiveContext& ctx, const std::vector<int>& receivers,
                   const SharedState& state, const std::vector<StatePart>& parts) {
  const size_t hash_bytes = kHashBytes * parts.size();
  uint8_t* hashes = ctx.Scratch(hash_bytes);
  auto completions = std::make_shared<Completions>();
  constexpr size_t kHashesReady = ~size_t{0};
  // Joined before this function returns (the future's destructor), even on an early error.
  std::future<void> hashing = std::async(std::launch::async, [&, completions] {
    for (size_t i = 0; i < parts.size(); ++i) {
      const Hash h = HashPart(state, parts[i]);
      std::memcpy(hashes + kHashBytes * i, h.data(), kHashBytes);
    }
    completions->Push(kHashesReady);
  });
  std::vector<CollectiveContext::Pending> sends;
  std::vector<CollectiveContext::Pending> asks(receivers.size());
  std::vector<uint32_t*> asked(receivers.size());
  std::vector<uint32_t> next_ask(receivers.size(), 0);
  auto post_ask = [&](size_t k) {
    asked[k] = reinterpret_cast<uint32_t*>(ctx.Scratch(4 * kMaxAsk));
    asks[k] = ctx.RecvUpTo(receivers[k], Phase::kState, kRequestStep, next_ask[k]++, asked[k],
                           4 * kMaxAsk);
    Completions::Watch(completions, asks[k].request, k);
  };
  for (size_t k = 0; k < receivers.size(); ++k) post_ask(k);
  bool hashed = false;
  for (size_t open = receivers.size(); open > 0 || !hashed;) {
    absl::StatusOr<Completions::Done> done = completions->Next(ctx.deadline());
    if (!done.ok()) return done.status();
    if (done->key == kHashesReady) {
      hashed = true;
      for (int r : receivers) {
        sends.push_back(ctx.Send(r, Phase::kState, kHashStep, 0, hashes, hash_bytes));
      }
      continue;
    }
    const size_t k = done->key;
    size_t received = 0;
    if (absl::Status s = ctx.Wait(asks[k], &received); !s.ok()) return s;
    if (received % 4 != 0) {
      return ctx.PeerError(receivers[k], absl::DataLossError(absl::StrFormat(
                                             "a state request of %d bytes", received)));
    }
    if (received == 0) {
      --open;  // That member has every part it asked for on its way.
      continue;
    }
    for (size_t j = 0; j < received / 4; ++j) {
      const uint32_t index = asked[k][j];
      if (index >= parts.size()) {
        return ctx.PeerError(receivers[k],
                             absl::DataLossError(absl::StrFormat("asked for state part %d of %d",
                                                                 index, parts.size())));
      }
      sends.push_back(ctx.Send(receivers[k], Phase::kState, kPartStep, index,
                               PartData(state, parts[index]), parts[index].bytes));
    }
    post_ask(k);
  }
  return ctx.WaitAll(sends);
}

// A stale member: fetches the parts it lacks and checks each against the hashes the holders
// agree on. Each holder gets kWindow parts to send at first and another as one of its parts
// arrives while its rate says it delivers it before the others are through what is left, so a
// faster link carries more of the state. A first download fetches every part at once, while the
// holders hash; a resumed one (`resume`) first hashes what this member holds, and fetches only
// the parts that differ.
class Downloader {
 public:
  Downloader(CollectiveContext& ctx, const std::vector<int>& sources, const SharedState& state,
             const std::vector<StatePart>& parts, StateDownload* download)
      : ctx_(ctx),
        sources_(sources),
        state_(state),
        parts_(parts),
        download_(download),
        next_ask_(sources.size(), 0),
        fetches_(parts.size()),
        source_of_(parts.size(), -1),
        bytes_from_(sources.size(), 0) {}

  absl::Status Run(bool resume) {
    std::vector<CollectiveContext::Pending> pending;
    for (int s : sources_) {
      lists_.push_back(ctx_.Scratch(kHashBytes * parts_.size()));
      pending.push_back(
          ctx_.Recv(s, Phase::kState, kHashStep, 0, lists_.back(), kHashBytes * parts_.size()));
    }
    if (!resume) {
      for (size_t i = 0; i < parts_.size(); ++i) wanted_.push_back(static_cast<uint32_t>(i));
      for (size_t k = 0; k < sources_.size(); ++k) Give(k, kWindow);
    }
    if (absl::Status s = ctx_.WaitAll(pending); !s.ok()) return s;
    if (absl::Status s = CheckHashListsAgree(); !s.ok()) {
      // Asks for nothing, so that the holders finish, and fails: this rank cannot be a member.
      FinishAll();
      ctx_.WaitAll(sends_).IgnoreError();
      return s;
    }
    if (resume) {
      // The parts this member does not hold already (a download cut short left some).
      for (size_t i = 0; i < parts_.size(); ++i) {
        if (!MatchesList(i)) wanted_.push_back(static_cast<uint32_t>(i));
      }
      for (size_t k = 0; k < sources_.size(); ++k) Give(k, kWindow);
    }
    if (absl::Status s = ReceiveParts(); !s.ok()) return s;
    for (size_t k = 0; k < sources_.size(); ++k) {
      if (bytes_from_[k] == 0) continue;
      download_->sources.push_back(sources_[k]);
      download_->bytes_from.push_back(bytes_from_[k]);
    }
    return ctx_.WaitAll(sends_);
  }

 private:
  // Sends holder k a request for `indexes` (empty: the end).
  void Ask(size_t k, const std::vector<uint32_t>& indexes) {
    uint8_t* message = ctx_.Scratch(4 * indexes.size() + 1);
    // An empty request (the end) has no data to copy: memcpy from its null data() is undefined.
    if (!indexes.empty()) std::memcpy(message, indexes.data(), 4 * indexes.size());
    sends_.push_back(ctx_.Send(sources_[k], Phase::kState, kRequestStep, next_ask_[k]++, message,
                               4 * indexes.size()));
  }

  void FinishAll() {
    if (finished_) return;
    finished_ = true;
    for (size_t k = 0; k < sources_.size(); ++k) Ask(k, {});
  }

  // Asks holder k for up to `count` more parts.
  void Give(size_t k, size_t count) {
    std::vector<uint32_t> indexes;
    while (indexes.size() < std::min(count, kMaxAsk) && !wanted_.empty()) {
      const uint32_t i = wanted_.front();
      wanted_.pop_front();
      source_of_[i] = static_cast<int>(k);
      fetches_[i] = ctx_.Recv(sources_[k], Phase::kState, kPartStep, i, PartData(state_, parts_[i]),
                              parts_[i].bytes);
      Completions::Watch(completions_, fetches_[i].request, i);
      indexes.push_back(i);
      ++in_flight_;
    }
    if (!indexes.empty()) Ask(k, indexes);
  }

  bool MatchesList(size_t i) const {
    return std::memcmp(HashPart(state_, parts_[i]).data(), lists_[0] + kHashBytes * i,
                       kHashBytes) == 0;
  }

  absl::Status CheckHashListsAgree() const {
    for (size_t k = 1; k < sources_.size(); ++k) {
      for (size_t i = 0; i < parts_.size(); ++i) {
        if (std::memcmp(lists_[0] + kHashBytes * i, lists_[k] + kHashBytes * i, kHashBytes) != 0) {
          return ctx_.PeerError(
              sources_[k],
              absl::DataLossError(absl::StrFormat(
                  "members hold different state: part %d of tensor '%s' differs from what %s "
                  "holds",
                  i, state_.tensors[parts_[i].tensor].first,
                  ctx_.PeerError(sources_[0], absl::OkStatus()).message())));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReceiveParts() {
    if (wanted_.empty()) FinishAll();
    const absl::Time start = absl::Now();
    while (in_flight_ > 0) {
      absl::StatusOr<Completions::Done> done = completions_->Next(ctx_.deadline());
      if (!done.ok()) return done.status();
      const size_t i = done->key;
      const size_t k = static_cast<size_t>(source_of_[i]);
      --in_flight_;
      if (absl::Status s = ctx_.Wait(fetches_[i]); !s.ok()) return s;
      if (!MatchesList(i)) {
        return ctx_.PeerError(
            sources_[k], absl::DataLossError(
                             absl::StrFormat("state part %d of tensor '%s' does not match its hash",
                                             i, state_.tensors[parts_[i].tensor].first)));
      }
      download_->bytes += parts_[i].bytes;
      bytes_from_[k] += parts_[i].bytes;
      ++download_->parts_downloaded;
      if (WorthAnother(k, std::max(1e-3, absl::ToDoubleSeconds(absl::Now() - start)))) Give(k, 1);
      if (wanted_.empty()) FinishAll();
    }
    FinishAll();
    return absl::OkStatus();
  }

  // The download lasts until its slowest link delivers its last part: holder k gets another part
  // only if, at the rate it has shown, it delivers it before the others (at theirs) are through
  // what is left. The fastest holder always gets one.
  bool WorthAnother(size_t k, double elapsed_s) const {
    double total_rate = 0, fastest = 0, left = 0;
    for (uint64_t b : bytes_from_) {
      total_rate += static_cast<double>(b) / elapsed_s;
      fastest = std::max(fastest, static_cast<double>(b) / elapsed_s);
    }
    for (uint32_t w : wanted_) left += static_cast<double>(parts_[w].bytes);
    const double rate = static_cast<double>(bytes_from_[k]) / elapsed_s;
    return rate >= fastest || in_flight_ == 0 ||
           (!wanted_.empty() &&
            static_cast<double>(parts_[wanted_.front()].bytes) / rate <= left / total_rate);
  }

  CollectiveContext& ctx_;
  const std::vector<int>& sources_;
  const SharedState& state_;
  const std::vector<StatePart>& parts_;
  StateDownload* download_;
  std::vector<uint8_t*> lists_;  // Each holder's hash list.
  std::vector<uint32_t> next_ask_;
  std::vector<CollectiveContext::Pending> sends_;
  std::shared_ptr<Completions> completions_ = std::make_shared<Completions>();
  std::vector<CollectiveContext::Pending> fetches_;
  std::vector<int> source_of_;
  std::vector<uint64_t> bytes_from_;
  std::deque<uint32_t> wanted_;
  size_t in_flight_ = 0;
  bool finished_ = false;  // Every holder was told the end.
};

}  // namespace

size_t SharedState::bytes() const {
  size_t total = 0;
  for (const auto& [name, buffer] : tensors) total += buffer.bytes();
  return total;
}

uint64_t SharedState::Fingerprint() const {
  if (tensors.empty()) return 0;
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha256(), nullptr);
  for (const auto& [name, buffer] : tensors) {
    const uint64_t fields[2] = {static_cast<uint64_t>(buffer.dtype), buffer.count};
    EVP_DigestUpdate(md, name.data(), name.size() + 1);  // With its terminator: names stay apart.
    EVP_DigestUpdate(md, fields, sizeof(fields));
  }
  Hash hash{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(md, hash.data(), &length);
  EVP_MD_CTX_free(md);
  uint64_t fingerprint;
  std::memcpy(&fingerprint, hash.data(), sizeof(fingerprint));
  return fingerprint | 1;  // Never 0, which means "no state".
}

std::vector<StatePart> SplitState(const SharedState& state, size_t part_bytes) {
  std::vector<StatePart> parts;
  for (size_t t = 0; t < state.tensors.size(); ++t) {
    const size_t bytes = state.tensors[t].second.bytes();
    for (size_t offset = 0; offset < bytes; offset += part_bytes) {
      parts.push_back(StatePart{static_cast<int>(t), offset, std::min(part_bytes, bytes - offset)});
    }
  }
  return parts;
}

size_t StatePartBytes(size_t total, int sources) {
  constexpr size_t kMinPart = 256 << 10;
  constexpr size_t kMaxPart = 16 << 20;
  // Many parts per holder: the fast links take more of them, and the last part of a slow link,
  // which the download waits for, is short.
  const size_t per_source = total / (32 * static_cast<size_t>(std::max(sources, 1)));
  return std::max(std::clamp(per_source, kMinPart, kMaxPart), total / (kMaxParts / 2) + 1);
}

absl::Status TransferState(CollectiveContext& ctx, const std::vector<uint8_t>& stale,
                           const SharedState& state, bool resume, StateDownload* download) {
  std::vector<int> sources, receivers;
  for (int r = 0; r < ctx.size(); ++r) (stale[r] ? receivers : sources).push_back(r);
  if (receivers.empty() || sources.empty() || state.bytes() == 0) return absl::OkStatus();
  const absl::Time start = absl::Now();
  const std::vector<StatePart> parts =
      SplitState(state, StatePartBytes(state.bytes(), static_cast<int>(sources.size())));
  absl::Status status;
  if (stale[ctx.rank()]) {
    *download = StateDownload{};
    download->parts = static_cast<int>(parts.size());
    status = Downloader(ctx, sources, state, parts, download).Run(resume);
    download->time = absl::Now() - start;
  } else {
    status = Serve(ctx, receivers, state, parts);
  }
  ctx.EndPhase("state transfer");
  return status;
}

}  // namespace hmc
