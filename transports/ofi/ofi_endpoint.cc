#include "transports/ofi/ofi_endpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/log.h"

namespace hmc {
namespace {

constexpr int kCompletionsPerRead = 16;
// How soon an operation the provider refused (FI_EAGAIN) is tried again; progress runs meanwhile.
// Twice as long after each round the provider took none of them, up to the longest: a dead peer's
// operations, refused until its link ends them, must not keep the thread spinning.
constexpr absl::Duration kRetryAfter = absl::Microseconds(10);
constexpr absl::Duration kLongestRetryAfter = absl::Milliseconds(1);

// rxm's eager limit: its buffer size (16 KiB unless FI_OFI_RXM_BUFFER_SIZE says otherwise), or
// FI_OFI_RXM_EAGER_LIMIT where set (the larger, so that a receive sized by it holds every eager
// message whole). libfabric has no call that reports it.
size_t RxmEagerLimit() {
  size_t limit = 16 << 10;
  for (const char* name : {"FI_OFI_RXM_BUFFER_SIZE", "FI_OFI_RXM_EAGER_LIMIT"}) {
    size_t value = 0;
    if (const char* set = std::getenv(name); set != nullptr && absl::SimpleAtoi(set, &value)) {
      limit = std::max(limit, value);
    }
  }
  return limit;
}

template <typename Fid>
void CloseFid(Fid*& fid) {
  if (fid != nullptr) fi_close(&fid->fid);
  fid = nullptr;
}

}  // namespace

absl::Status OfiError(ssize_t code, const std::string& what) {
  const int error = static_cast<int>(code < 0 ? -code : code);
  const std::string message = absl::StrFormat("%s: %s", what, fi_strerror(error));
  switch (error) {
    case FI_ECANCELED:
      return absl::CancelledError(message);
    case FI_ETIMEDOUT:
      return absl::DeadlineExceededError(message);
    case FI_EINVAL:
      return absl::InvalidArgumentError(message);
    case FI_ENOMEM:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::UnavailableError(message);
  }
}

absl::StatusOr<std::unique_ptr<OfiEndpoint>> OfiEndpoint::Create(const OfiResources& resources) {
  std::unique_ptr<OfiEndpoint> endpoint(new OfiEndpoint());
  if (absl::Status s = endpoint->Init(resources); !s.ok()) return s;
  OfiEndpoint* e = endpoint.get();
  e->thread_.Start({.progress = [e] { return e->Progress(); },
                    .sleep = [e](int max_ms) { e->Sleep(max_ms); },
                    .wake = [e] { fi_cq_signal(e->cq_); }});
  return endpoint;
}

absl::Status OfiEndpoint::Init(const OfiResources& resources) {
  fi_info* hints = fi_allocinfo();
  if (hints == nullptr) return absl::ResourceExhaustedError("libfabric: fi_allocinfo");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  // The registration modes hmc can meet: it registers the buffers of its operations where the
  // provider needs that (FI_MR_LOCAL), bound to the endpoint where asked (FI_MR_ENDPOINT); the
  // rest concern remote access, which hmc does not use.
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  hints->fabric_attr->prov_name = strdup(resources.provider.c_str());
  const int got =
      fi_getinfo(FI_VERSION(1, 9), resources.source.empty() ? nullptr : resources.source.c_str(),
                 nullptr, resources.source.empty() ? 0 : FI_SOURCE, hints, &info_);
  fi_freeinfo(hints);
  if (got != 0 || info_ == nullptr) {
    return OfiError(
        got, absl::StrFormat(
                 "libfabric: no provider '%s'%s with tagged reliable datagrams", resources.provider,
                 resources.source.empty() ? "" : absl::StrFormat(" at '%s'", resources.source)));
  }
  const int modes = info_->domain_attr->mr_mode;
  register_memory_ = (modes & FI_MR_LOCAL) != 0 || resources.register_always;
  bind_memory_ = (modes & FI_MR_ENDPOINT) != 0;
  provider_keys_ = (modes & FI_MR_PROV_KEY) != 0;
  eager_limit_ = RxmEagerLimit();
  if (int r = fi_fabric(info_->fabric_attr, &fabric_, nullptr); r != 0) {
    return OfiError(r, "libfabric: fi_fabric");
  }
  if (int r = fi_domain(fabric_, info_, &domain_, nullptr); r != 0) {
    return OfiError(r, "libfabric: fi_domain");
  }
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_UNSPEC;
  if (fi_cq_open(domain_, &cq_attr, &cq_, nullptr) != 0) {
    cq_waits_ = false;  // A provider without wait objects: the thread naps instead.
    cq_attr.wait_obj = FI_WAIT_NONE;
    if (int r = fi_cq_open(domain_, &cq_attr, &cq_, nullptr); r != 0) {
      return OfiError(r, "libfabric: fi_cq_open");
    }
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if (int r = fi_av_open(domain_, &av_attr, &av_, nullptr); r != 0) {
    return OfiError(r, "libfabric: fi_av_open");
  }
  if (int r = fi_endpoint(domain_, info_, &ep_, nullptr); r != 0) {
    return OfiError(r, "libfabric: fi_endpoint");
  }
  if (int r = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV); r != 0) {
    return OfiError(r, "libfabric: binding the completion queue");
  }
  if (int r = fi_ep_bind(ep_, &av_->fid, 0); r != 0) {
    return OfiError(r, "libfabric: binding the address vector");
  }
  if (int r = fi_enable(ep_); r != 0) return OfiError(r, "libfabric: fi_enable");
  char name[256];
  size_t length = sizeof(name);
  if (int r = fi_getname(&ep_->fid, name, &length); r != 0) {
    return OfiError(r, "libfabric: the endpoint's name");
  }
  name_.assign(name, length);
  return absl::OkStatus();
}

OfiEndpoint::~OfiEndpoint() {
  thread_.Stop();
  CloseFid(ep_);
  // Closing the endpoint discards what was in flight: end those ops, so their requests complete.
  for (OfiOp* op : std::set<OfiOp*>(live_)) Finish(op, FI_ECANCELED, 0, 0);
  while (!deferred_.empty()) AbandonHeldBack(deferred_.begin()->first);
  CloseFid(av_);
  CloseFid(cq_);
  CloseFid(domain_);
  CloseFid(fabric_);
  if (info_ != nullptr) fi_freeinfo(info_);
}

std::string OfiEndpoint::Describe() const {
  return info_ == nullptr ? "libfabric"
                          : absl::StrFormat("%s on %s%s", info_->fabric_attr->prov_name,
                                            info_->domain_attr->name,
                                            register_memory_ ? ", registered buffers" : "");
}

absl::StatusOr<fi_addr_t> OfiEndpoint::Insert(const std::string& name) {
  fi_addr_t address = FI_ADDR_UNSPEC;
  const int inserted = fi_av_insert(av_, name.data(), 1, &address, 0, nullptr);
  if (inserted != 1)
    return OfiError(inserted < 0 ? inserted : FI_EINVAL, "libfabric: fi_av_insert");
  return address;
}

int OfiEndpoint::Register(const OfiBuffer& buffer, std::unique_ptr<OfiRegistration>& memory) {
  if (!register_memory_ || buffer.bytes == 0 || ep_ == nullptr) return 0;
  fid_mr* mr = nullptr;
  // The key matters only for remote access; without provider keys it must be unique.
  const uint64_t key = provider_keys_ ? 0 : next_key_++;
  int r = fi_mr_reg(domain_, buffer.data, buffer.bytes, buffer.access, 0, key, 0, &mr, nullptr);
  if (r == 0) {
    memory = std::make_unique<OfiRegistration>(mr);
    if (bind_memory_ && (r = fi_mr_bind(mr, &ep_->fid, 0)) == 0) r = fi_mr_enable(mr);
  }
  if (r == 0) {
    registrations_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  memory.reset();
  Logf("ofi", "registering %d bytes at %p failed: %s", buffer.bytes, buffer.data, fi_strerror(-r));
  return -r;
}

void OfiEndpoint::Start(fi_addr_t peer, const OfiBuffer& buffer, OfiStart start, OfiDone done) {
  std::unique_ptr<OfiRegistration> memory;
  if (const int error = Register(buffer, memory); error != 0) {
    done(nullptr, error, 0, 0);
    return;
  }
  Deferred op{std::move(start), std::move(done), std::move(memory)};
  // Behind an operation the provider refused for now, so that a peer's operations post in the
  // order they were started: two sends (or receives) of one tag must not swap.
  auto held = deferred_.find(peer);
  if (held != deferred_.end()) {
    held->second.ops.push_back(std::move(op));
    return;
  }
  if (!TryStart(op)) {
    HeldBack& fresh = deferred_[peer];
    fresh.ops.push_back(std::move(op));
    fresh.since = absl::Now();
    if (!retry_due_) {
      retry_due_ = true;
      retry_after_ = kRetryAfter;
      thread_.PostAfter(retry_after_, [this] { StartDeferred(); });
    }
  }
}

absl::Duration OfiEndpoint::RefusedFor(fi_addr_t peer) const {
  auto held = deferred_.find(peer);
  return held == deferred_.end() ? absl::ZeroDuration() : absl::Now() - held->second.since;
}

void OfiEndpoint::AbandonHeldBack(fi_addr_t peer) {
  auto held = deferred_.find(peer);
  if (held == deferred_.end()) return;
  std::deque<Deferred> abandoned = std::move(held->second.ops);
  deferred_.erase(held);
  for (Deferred& d : abandoned) {
    if (d.done) d.done(nullptr, FI_ECANCELED, 0, 0);
  }
}

bool OfiEndpoint::TryStart(Deferred& deferred) {
  auto* op = new OfiOp{};
  live_.insert(op);
  if (ep_ == nullptr) {  // Closed: what starts now ends at once.
    op->done = std::move(deferred.done);
    Finish(op, FI_ECANCELED, 0, 0);
    return true;
  }
  const ssize_t r = deferred.start(
      &op->context, deferred.memory != nullptr ? deferred.memory->descriptor() : nullptr);
  if (r == -FI_EAGAIN) {
    // The provider's queues are full: try again once progress has drained some of them.
    live_.erase(op);
    delete op;
    return false;
  }
  op->done = std::move(deferred.done);
  op->memory = std::move(deferred.memory);
  if (r != 0) Finish(op, static_cast<int>(-r), 0, 0);
  return true;
}

void OfiEndpoint::StartDeferred() {
  retry_due_ = false;
  bool took_any = false;
  for (auto held = deferred_.begin(); held != deferred_.end();) {
    std::deque<Deferred>& queue = held->second.ops;
    const size_t before = queue.size();
    while (!queue.empty() && TryStart(queue.front())) queue.pop_front();
    if (queue.size() < before) {
      took_any = true;
      held->second.since = absl::Now();
    }
    held = queue.empty() ? deferred_.erase(held) : std::next(held);
  }
  if (!deferred_.empty()) {
    retry_due_ = true;
    retry_after_ = took_any ? kRetryAfter : std::min(2 * retry_after_, kLongestRetryAfter);
    thread_.PostAfter(retry_after_, [this] { StartDeferred(); });
  }
}

void OfiEndpoint::Cancel(void* context) {
  if (live_.contains(reinterpret_cast<OfiOp*>(context))) fi_cancel(&ep_->fid, context);
}

void OfiEndpoint::Finish(OfiOp* op, int error, size_t length, size_t sent) {
  live_.erase(op);
  std::unique_ptr<OfiOp> owned(op);
  if (op->done) op->done(&op->context, error, length, sent);
}

void OfiEndpoint::Handle(const fi_cq_tagged_entry* entries, ssize_t n) {
  for (ssize_t i = 0; i < n; ++i) {
    const fi_cq_tagged_entry& e = entries[i];
    Finish(reinterpret_cast<OfiOp*>(e.op_context), 0, e.len,
           (e.flags & FI_REMOTE_CQ_DATA) != 0 ? e.data : e.len);
  }
}

void OfiEndpoint::HandleError() {
  fi_cq_err_entry error{};
  if (fi_cq_readerr(cq_, &error, 0) <= 0 || error.op_context == nullptr) return;
  // rxm leaves the flag out of a truncated receive's entry when the receive came first, yet
  // fills in the data; no message is truncated that had no bytes, so a non-zero data is the
  // sender's length.
  const bool has_data =
      (error.flags & FI_REMOTE_CQ_DATA) != 0 || (error.err == FI_ETRUNC && error.data != 0);
  Finish(reinterpret_cast<OfiOp*>(error.op_context), error.err, error.len,
         has_data ? error.data : error.len + error.olen);
}

bool OfiEndpoint::Progress() {
  fi_cq_tagged_entry entries[kCompletionsPerRead];
  const ssize_t n = fi_cq_read(cq_, entries, kCompletionsPerRead);
  if (n > 0) {
    Handle(entries, n);
    return true;
  }
  if (n == -FI_EAVAIL) {
    HandleError();
    return true;
  }
  return false;
}

void OfiEndpoint::Sleep(int max_ms) {
  if (!cq_waits_) {
    usleep(static_cast<useconds_t>(std::min(max_ms, 1)) * 1000);
    return;
  }
  fi_cq_tagged_entry entries[kCompletionsPerRead];
  const ssize_t n = fi_cq_sread(cq_, entries, kCompletionsPerRead, nullptr, max_ms);
  if (n > 0) Handle(entries, n);
  if (n == -FI_EAVAIL) HandleError();
}

}  // namespace hmc
