#ifndef HMC_TRANSPORTS_TCP_TCP_LOOP_H_
#define HMC_TRANSPORTS_TCP_TCP_LOOP_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "transports/request.h"

namespace hmc {

class TcpChannel;

// What a TcpChannel needs from the progress thread that owns it.
class TcpLoop {
 public:
  // What an epoll registration points at.
  struct Target {
    TcpChannel* channel;
    int stream;
  };

  virtual ~TcpLoop() = default;
  // Runs `work` on the progress thread (from any thread).
  virtual void Post(std::function<void()> work) = 0;
  // Runs `work` on the calling thread where the progress thread is idle and nothing posted waits
  // (EventLoop::RunHereOrPost), else posts it: what a channel's sends and receives take.
  virtual void RunHereOrPost(std::function<void()> work) = 0;
  // A request of a channel's send or receive, of this loop (Request::loop); whether its waiter
  // may poll the loop (Request::waiter_polls).
  virtual RequestPtr NewRequest(bool waiter_polls) = 0;
  virtual void Watch(int fd, Target* target, uint32_t events) = 0;
  virtual void Modify(int fd, Target* target, uint32_t events) = 0;
  virtual void Unwatch(int fd) = 0;
  // Memory for messages that arrive before their receive: false when the budget is spent.
  virtual bool ReserveUnexpected(uint64_t bytes) = 0;
  virtual void ReleaseUnexpected(uint64_t bytes) = 0;
  virtual void OnChannelFailed(int rank, const absl::Status& why) = 0;
};

}  // namespace hmc

#endif  // HMC_TRANSPORTS_TCP_TCP_LOOP_H_
