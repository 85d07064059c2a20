#ifndef HMC_TRANSPORTS_UCX_UCX_WORKER_H_
#define HMC_TRANSPORTS_UCX_UCX_WORKER_H_

#include <ucp/api/ucp.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transports/progress_thread.h"

namespace hmc {

// Which of UCX's transports a worker may use, as UCX_TLS and UCX_NET_DEVICES spell them; empty:
// what the environment says, else everything UCX finds (shared memory between local peers,
// RDMA and TCP otherwise).
struct UcxResources {
  std::string tls;
  std::string net_devices;
};

// One UCP context and worker with the thread that alone calls into them (ProgressThread): UCP
// runs in its single-thread mode. The thread sleeps in epoll on the worker's event descriptor
// (armed with ucp_worker_arm) and on an eventfd that Post writes.
class UcxWorker {
 public:
  static absl::StatusOr<std::unique_ptr<UcxWorker>> Create(const UcxResources& resources);
  // Stops the thread (work still posted runs first) and releases the worker and context: every
  // endpoint must have been closed by then.
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h worker() const { return worker_; }
  // The worker's address (opaque bytes) that peers create endpoints to.
  const std::string& address() const { return address_; }
  void Post(std::function<void()> work) { thread_.Post(std::move(work)); }
  void PostAfter(absl::Duration delay, std::function<void()> work) {
    thread_.PostAfter(delay, std::move(work));
  }
  void RunAndWait(const std::function<void()>& work) { thread_.RunAndWait(work); }
  ProgressThread& thread() { return thread_; }

 private:
  UcxWorker() = default;
  absl::Status Init(const UcxResources& resources);
  void Sleep(int max_ms);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::string address_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  ProgressThread thread_;
};

// A UCX status as an absl::Status of the same meaning, prefixed with `what`.
absl::Status UcxError(ucs_status_t status, const std::string& what);

}  // namespace hmc

#endif  // HMC_TRANSPORTS_UCX_UCX_WORKER_H_
