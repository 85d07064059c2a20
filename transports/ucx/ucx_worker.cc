#include "transports/ucx/ucx_worker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace hmc {

absl::Status UcxError(ucs_status_t status, const std::string& what) {
  const std::string message = absl::StrFormat("%s: %s", what, ucs_status_string(status));
  switch (status) {
    case UCS_ERR_INVALID_PARAM:
      return absl::InvalidArgumentError(message);
    case UCS_ERR_NO_MEMORY:
      return absl::ResourceExhaustedError(message);
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT:
      return absl::DeadlineExceededError(message);
    case UCS_ERR_CANCELED:
      return absl::CancelledError(message);
    default:
      return absl::UnavailableError(message);
  }
}

absl::StatusOr<std::unique_ptr<UcxWorker>> UcxWorker::Create(const UcxResources& resources) {
  std::unique_ptr<UcxWorker> worker(new UcxWorker());
  if (absl::Status s = worker->Init(resources); !s.ok()) return s;
  UcxWorker* w = worker.get();
  w->thread_.Start({.progress = [w] { return ucp_worker_progress(w->worker_) != 0; },
                    .sleep = [w](int max_ms) { w->Sleep(max_ms); },
                    .wake =
                        [w] {
                          const uint64_t one = 1;
                          // A failed write only delays the wake-up: the sleep is bounded.
                          (void)!write(w->wake_fd_, &one, sizeof(one));
                        }});
  return worker;
}

absl::Status UcxWorker::Init(const UcxResources& resources) {
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    return UcxError(s, "UCX: reading its configuration");
  }
  ucs_status_t s = UCS_OK;
  if (!resources.tls.empty()) s = ucp_config_modify(config, "TLS", resources.tls.c_str());
  if (s == UCS_OK && !resources.net_devices.empty()) {
    s = ucp_config_modify(config, "NET_DEVICES", resources.net_devices.c_str());
  }
  if (s != UCS_OK) {
    ucp_config_release(config);
    return UcxError(s, absl::StrFormat("UCX: tls '%s', net_devices '%s'", resources.tls,
                                       resources.net_devices));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "hmc";
  s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (s != UCS_OK) return UcxError(s, "UCX: creating its context");

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (s = ucp_worker_create(context_, &worker_params, &worker_); s != UCS_OK) {
    return UcxError(s, "UCX: creating a worker");
  }
  ucp_address_t* address = nullptr;
  size_t length = 0;
  if (s = ucp_worker_get_address(worker_, &address, &length); s != UCS_OK) {
    return UcxError(s, "UCX: the worker's address");
  }
  address_.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker_, address);

  int event_fd = -1;
  if (s = ucp_worker_get_efd(worker_, &event_fd); s != UCS_OK) {
    return UcxError(s, "UCX: the worker's event descriptor");
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return absl::InternalError(absl::StrFormat("UCX progress: %s", std::strerror(errno)));
  }
  for (int fd : {event_fd, wake_fd_}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
      return absl::InternalError(absl::StrFormat("UCX progress: epoll: %s", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

UcxWorker::~UcxWorker() {
  thread_.Stop();
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void UcxWorker::Sleep(int max_ms) {
  const ucs_status_t armed = ucp_worker_arm(worker_);
  if (armed == UCS_ERR_BUSY) return;  // Events arrived meanwhile: progress them first.
  epoll_event events[2];
  const int n = epoll_wait(epoll_fd_, events, 2, armed == UCS_OK ? max_ms : std::min(max_ms, 1));
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd == wake_fd_) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
    }
  }
}

}  // namespace hmc
