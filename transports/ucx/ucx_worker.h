#ifndef HMC_TRANSPORTS_UCX_UCX_WORKER_H_
#define HMC_TRANSPORTS_UCX_UCX_WORKER_H_

#include <ucp/api/ucp.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/mutex.h"

namespace hmc {

// Which of UCX's transports a worker may use, as UCX_TLS and UCX_NET_DEVICES spell them; empty:
// what the environment says, else everything UCX finds (shared memory between local peers,
// RDMA and TCP otherwise).
struct UcxResources {
  std::string tls;
  std::string net_devices;
};

// One UCP context and worker with the thread that alone calls into them. UCP runs in its
// single-thread mode: other threads hand work to the progress thread (Post), which runs it
// between progress calls. The thread sleeps in epoll on the worker's event descriptor (armed with
// ucp_worker_arm) and on an eventfd that Post writes: no busy polling.
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
  // Runs `work` on the progress thread, in posting order.
  void Post(std::function<void()> work);
  // Runs `work` on the progress thread once `delay` has passed (as soon as it can after).
  void PostAfter(absl::Duration delay, std::function<void()> work);
  // Runs `work` on the progress thread and returns once it ran.
  void RunAndWait(const std::function<void()>& work);
  bool OnProgressThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  UcxWorker() = default;
  absl::Status Init(const UcxResources& resources);
  void Run();
  // Runs what was posted and the timers that are due; returns whether there was any.
  bool RunPosted();
  // Polls the worker and the posted work for a short while; returns whether either had any.
  bool PollBriefly();
  // How long the thread may sleep: until the next timer, at most `cap`.
  int SleepMs(int cap);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::string address_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  Mutex mu_;
  std::vector<std::function<void()>> posted_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, std::function<void()>> timers_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// A UCX status as an absl::Status of the same meaning, prefixed with `what`.
absl::Status UcxError(ucs_status_t status, const std::string& what);

}  // namespace hmc

#endif  // HMC_TRANSPORTS_UCX_UCX_WORKER_H_
