#ifndef HMC_CORE_ACCEPT_GATE_H_
#define HMC_CORE_ACCEPT_GATE_H_

#include <sys/epoll.h>

#include <optional>

#include "absl/time/time.h"
#include "core/socket.h"

namespace hmc {

// Accepts connections from a listening socket watched (level-triggered) by an epoll set. When the
// process is out of descriptors, accept4 fails while the connection stays pending, so epoll would
// report the listener ready forever and the loop would spin: the gate then takes the listener out
// of the set for a moment, says so once, and puts it back on the next Tick after the pause.
class AcceptGate {
 public:
  static constexpr absl::Duration kPause = absl::Milliseconds(100);

  // Adds `listener` to `epoll` with `event` (its data identifies the listener to the caller).
  AcceptGate(int epoll, int listener, epoll_event event);

  // The next pending connection (non-blocking, close-on-exec), or nullopt when there is none now
  // or the gate paused.
  std::optional<UniqueFd> Next();
  // Whether the last Next() paused for lack of descriptors (the caller may shed a connection).
  bool out_of_descriptors() const { return paused_; }
  // Watches the listener again once the pause has passed.
  void Tick(absl::Time now);

 private:
  int epoll_;
  int listener_;
  epoll_event event_;
  bool paused_ = false;
  absl::Time resume_at_;
  bool said_ = false;  // Logged running out once: a flood must not flood the log too.
};

}  // namespace hmc

#endif  // HMC_CORE_ACCEPT_GATE_H_
