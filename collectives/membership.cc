// The communicator's membership epochs: what happens when a link fails, when the coordinator
// publishes a new table, and how a new epoch becomes current (group.h, averaging.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "collectives/communicator_impl.h"
#include "core/log.h"

namespace hmc {
namespace {

// How long a call that failed waits for the next epoch: the coordinator declares a stopped rank
// failed within its heartbeat timeout, and a link that drops everything fails within the data
// links' liveness timeout (both kAutoLivenessTimeout unless configured, or ten round trips of a
// rank's coordinator connection where those are longer); a crash takes a round trip.
absl::Duration EpochWait(const Options& options) {
  return 2 * std::max(options.heartbeat_timeout, kAutoLivenessTimeout);
}

}  // namespace

void CommunicatorImpl::DiscardEpochsBefore(uint32_t epoch, const absl::Status& why) {
  std::vector<std::shared_ptr<Channel>> channels;
  {
    MutexLock lock(&mu_);
    channels = world_channels_;
  }
  for (const auto& channel : channels) {
    if (channel != nullptr) channel->DiscardTagsBelow(EpochTagFloor(epoch), why);
  }
}

void CommunicatorImpl::OnPeerLost(int id, const absl::Status& why) {
  if (coordinator_ == nullptr) {
    Abort(why);  // Nobody can start a new epoch.
    return;
  }
  std::shared_ptr<const Group> g = group();
  if (!health().ok() || std::find(g->ids.begin(), g->ids.end(), id) == g->ids.end()) return;
  // Every call of this epoch needs the lost member: end them now rather than at their deadlines.
  DiscardEpochsBefore(g->epoch + 1,
                      MembershipChangedError(g->epoch, g->epoch + 1, std::string(why.message())));
  MutexLock lock(&mu_);
  failures_to_report_.push_back({id, std::string(why.message())});
}

void CommunicatorImpl::ExpectJoiners(const PeerTable& table) {
  if (transport_ == nullptr) return;
  std::vector<PeerAddress> joiners;
  {
    MutexLock lock(&mu_);
    for (const PeerEntry& p : table.peers) {
      const bool known =
          p.rank < static_cast<int>(world_channels_.size()) && world_channels_[p.rank] != nullptr;
      // A member this rank never heard joining (a table it missed) is expected the same way.
      if ((p.joining || p.alive) && p.rank != id_ && !known) {
        joiners.push_back(PeerAddress{p.rank, p.address, table.Describe(p.rank), p.zone});
      }
    }
  }
  if (joiners.empty()) return;
  std::vector<std::shared_ptr<Channel>> channels = transport_->ExpectPeers(joiners);
  MutexLock lock(&mu_);
  for (size_t i = 0; i < joiners.size(); ++i) {
    if (ParallelStreams* streams = channels[i]->parallel_streams())
      streams->SetActiveStreams(stream_choice_.streams);
    const int id = joiners[i].rank;
    if (static_cast<int>(world_channels_.size()) <= id) world_channels_.resize(id + 1);
    world_channels_[id] = channels[i];
    Logf("comm", "rank %d: %s is joining; waiting for its connections", id_,
         joiners[i].description);
  }
}

void CommunicatorImpl::ApplyMembership(const PeerTable& table) {
  ExpectJoiners(table);
  std::shared_ptr<const Group> g;  // The epoch this table ends.
  std::vector<std::shared_ptr<Channel>> channels;
  bool waits_for_round;  // It only adds members: it starts at an agreed round boundary.
  {
    MutexLock lock(&mu_);
    if (table.epoch <= world_table_.epoch || !broken_.ok()) return;
    world_table_ = table;
    g = group_;
    channels = world_channels_;
    waits_for_round =
        !ledger_.standing.newcomer &&
        std::all_of(g->ids.begin(), g->ids.end(), [&](int id) { return table.peers[id].alive; });
    if (waits_for_round) {
      join_tables_[table.epoch] = table;
    } else {
      join_tables_.clear();
    }
  }
  std::vector<std::string> changes;
  for (int id : g->ids) {
    const PeerEntry& entry = table.peers[id];
    if (!entry.alive && entry.failure != "left") {
      changes.push_back(absl::StrFormat("%s failed: %s", table.Describe(id), entry.failure));
    }
  }
  for (int id : table.Members()) {
    if (std::find(g->ids.begin(), g->ids.end(), id) == g->ids.end()) {
      changes.push_back(absl::StrFormat("%s joined", table.Describe(id)));
    }
  }
  const std::string cause = changes.empty() ? "members left" : absl::StrJoin(changes, "; ");
  {
    MutexLock lock(&mu_);
    epoch_causes_[table.epoch] = cause;
  }
  if (waits_for_round) {
    Logf("comm", "rank %d: epoch %d -> %d: %s; from the round boundary the members agree on", id_,
         g->epoch, table.epoch, cause);
    return;  // Nobody was lost: the calls in flight finish in their epoch.
  }
  Logf("comm", "rank %d: epoch %d -> %d: %s", id_, g->epoch, table.epoch, cause);
  int alive = 0;
  for (const PeerEntry& p : table.peers) {
    alive += p.alive ? 1 : 0;
    const bool removed = !p.alive && !p.joining && p.failure != "left" && p.rank != id_;
    if (removed && p.rank < static_cast<int>(channels.size()) && channels[p.rank] != nullptr) {
      // Tells a member that is alive but was declared failed why nobody talks to it any more.
      // Before the old epochs' tags are discarded: a closed link takes nothing more from its
      // peer, where discarding takes and drops what each peer still sends. A dead peer's
      // message, taken, is read from a connection that closed (libfabric's rxm crashes there).
      channels[p.rank]->Close(
          absl::UnavailableError(absl::StrFormat("%s was removed from the group at epoch %d: %s",
                                                 table.Describe(p.rank), table.epoch, p.failure)));
    }
  }
  DiscardEpochsBefore(table.epoch, MembershipChangedError(g->epoch, table.epoch, cause));
  const PeerEntry& me = table.peers[id_];
  if (!me.alive) {
    Abort(absl::UnavailableError(absl::StrFormat(
        "rank %d was removed from the group at epoch %d: %s", id_, table.epoch, me.failure)));
  } else if (alive < options_.min_ranks) {
    Abort(absl::UnavailableError(
        absl::StrFormat("epoch %d has %d live ranks, fewer than min_ranks=%d (%s)", table.epoch,
                        alive, options_.min_ranks, cause)));
  } else if (table.epoch > kMaxEpoch) {
    Abort(absl::ResourceExhaustedError(
        absl::StrFormat("more than %d membership epochs in one job", kMaxEpoch)));
  }
}

void CommunicatorImpl::OnCoordinatorLost() {
  Logf("comm", "rank %d: lost the coordinator: training goes on, but a failure now ends the group",
       id_);
  MutexLock lock(&mu_);
  coordinator_lost_ = true;
}

bool CommunicatorImpl::AwaitEpochAfter(uint32_t epoch, absl::Time deadline) {
  MutexLock lock(&mu_);
  auto moved = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return group_->epoch > epoch || !broken_.ok() || stopping_ || coordinator_lost_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&moved), deadline);
  return group_->epoch > epoch;
}

absl::Status CommunicatorImpl::AfterFailure(const Group& g, const absl::Status& failure) {
  const absl::Duration wait = coordinator_ != nullptr ? EpochWait(options_) : absl::ZeroDuration();
  if (AwaitEpochAfter(g.epoch, absl::Now() + wait)) {
    // Named by the epoch that followed g's: who failed, and why (the call's own error may only
    // show a symptom, such as a link closed by the membership change).
    MutexLock lock(&mu_);
    auto cause = epoch_causes_.upper_bound(g.epoch);
    return MembershipChangedError(
        g.epoch, group_->epoch,
        cause != epoch_causes_.end() ? cause->second : std::string(failure.message()));
  }
  // Nobody failed, as far as the coordinator knows (a deadline, or a member out of step), or no
  // coordinator is left to start an epoch: the group cannot go on.
  Abort(failure);
  return failure;
}

void CommunicatorImpl::MembershipLoop() {
  for (;;) {
    std::vector<std::pair<int, std::string>> reports;
    std::vector<uint32_t> resumed;
    bool tell_ready;
    uint32_t epoch;
    uint32_t adopt;
    {
      MutexLock lock(&mu_);
      auto work = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || !failures_to_report_.empty() || !resumed_to_report_.empty() ||
               ready_to_tell_ || EpochToAdopt() > 0;
      };
      mu_.Await(absl::Condition(&work));
      if (stopping_) return;
      reports.swap(failures_to_report_);
      resumed.swap(resumed_to_report_);
      tell_ready = ready_to_tell_;
      ready_to_tell_ = false;
      epoch = group_->epoch;
      adopt = EpochToAdopt();
    }
    for (const auto& [id, cause] : reports) {
      if (absl::Status s = coordinator_->ReportFailure(epoch, id, cause); !s.ok()) {
        Logf("comm", "rank %d: could not report rank %d's failure: %s", id_, id, s.message());
      }
    }
    if (tell_ready) {
      if (absl::Status s = coordinator_->Put(absl::StrCat(ReadyKeyPrefix(options_.world_id), id_),
                                             "", absl::Now() + options_.connect_timeout);
          !s.ok()) {
        Logf("comm", "rank %d: could not tell the coordinator it is ready: %s", id_, s.message());
      }
    }
    for (uint32_t e : resumed) {
      coordinator_
          ->Put(absl::StrCat(ResumedKeyPrefix(options_.world_id), e),
                absl::StrCat(absl::ToUnixMillis(absl::Now())), absl::Now() + absl::Seconds(5))
          .IgnoreError();  // Only for the log.
    }
    if (adopt > 0) Adopt(adopt);
  }
}

uint32_t CommunicatorImpl::EpochToAdopt() const {
  if (!broken_.ok() || world_table_.epoch <= group_->epoch) return 0;
  if (join_tables_.empty()) return world_table_.epoch;
  // Exactly the agreed one, once its table is here: every member adopts the same epochs (one
  // in between would wait in its reconciliation for members that skip it).
  if (agreed_epoch_ > group_->epoch && join_tables_.contains(agreed_epoch_)) return agreed_epoch_;
  return 0;
}

void CommunicatorImpl::Adopt(uint32_t epoch) {
  PeerTable table;
  uint32_t before;
  bool at_boundary = false;
  {
    MutexLock lock(&mu_);
    before = group_->epoch;
    if (auto it = join_tables_.find(epoch); it != join_tables_.end()) {
      table = it->second;
      join_tables_.erase(join_tables_.begin(), std::next(it));
      at_boundary = true;
    } else {
      table = world_table_;
    }
  }
  // Nothing of the old epoch is in flight at a round boundary; what it left queued goes.
  if (at_boundary) {
    DiscardEpochsBefore(epoch, MembershipChangedError(before, epoch, "members joined"));
  }
  const absl::Time start = absl::Now();
  std::shared_ptr<const Group> g;
  {
    // With the probe as it is now: one that finished meanwhile (ProbeLinks) would be lost if the
    // group were made from the probe before it.
    MutexLock lock(&mu_);
    g = Group::Make(table, id_, world_channels_, WorldLinks(probe_, table));
    group_ = g;
    next_sequence_ = 1;
    sends_to_.clear();
    receives_from_.clear();
  }
  Reconcile(g);
  Logf("comm", "rank %d: epoch %d adopted: %d ranks (%s), reconciled in %s", id_, g->epoch,
       g->size(), absl::StrJoin(g->ids, ","), absl::FormatDuration(absl::Now() - start));
}

}  // namespace hmc
