#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "core/frame_io.h"
#include "core/log.h"
#include "transports/tcp/cma.h"
#include "transports/tcp/stripe.h"
#include "transports/tcp/tcp_channel.h"
#include "transports/tcp/tcp_channel_parts.h"
#include "transports/tcp/tcp_loop.h"

namespace hmc {

void TcpChannel::Pull(uint64_t tag, const std::vector<uint8_t>& description) {
  Incoming& in = *incoming_[tag];
  absl::StatusOr<PullOffer> offer = PullOffer::Parse(description);
  if (!offer.ok()) {
    Fail(Error(offer.status().message()), /*notify=*/true);
    return;
  }
  if (offer->bytes != in.total) {  // The receive's buffer holds in.total bytes, no more.
    Fail(Error(absl::StrFormat("its offer to pull tag %#x names %d bytes, its frame %d", tag,
                               offer->bytes, in.total)),
         /*notify=*/true);
    return;
  }
  // This side may refuse pulls (pull_min_bytes == 0); then the sender streams the message.
  absl::Status outcome = limits_.pull_min_bytes == 0
                             ? absl::FailedPreconditionError("pulls are off")
                         : !peer_process_.has_value() || peer_process_unknown_
                             ? absl::FailedPreconditionError("the peer's process is not known")
                             : PullOffered(*peer_process_, tag, *offer, in.user);
  if (absl::IsDataLoss(outcome)) {  // Forged: a peer that means no harm never sends one.
    Fail(Error(outcome.message()), /*notify=*/true);
    return;
  }
  const bool pulled = outcome.ok();
  if (pulled) {
    counters_.AddReceived(in.total, 0);  // The message counts once it completes.
    in.stripes = 1;
    in.stripes_done = 1;
    Complete(tag);
  }
  // Last: sending may find the link broken and fail the channel, which clears all state. When the
  // pull failed, the sender streams the message instead and the receive stays posted.
  SendControl(FrameType::kRendezvousDone, tag, 0,
              std::vector<uint8_t>{pulled ? uint8_t{1} : uint8_t{0}});
}

}  // namespace hmc
