// The Channel contract of transports/transport.h, run over every transport that is built: the
// in-process one the algorithm tests use, TCP with one and four streams over TCP and over Unix
// domain sockets, UCX over TCP on loopback (UCX 1.13 offers no shared memory on endpoints that
// detect a dead peer, which hmc needs), and libfabric on tcp;ofi_rxm. A transport added later joins
// the list at the end and must
// pass the same tests.
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/testing/tcp_mesh.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/transport.h"
#ifdef HMC_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif
#ifdef HMC_HAVE_OFI
#include "transports/ofi/ofi_transport.h"
#endif

namespace hmc {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

using testing_util::ExchangeBothWays;
using testing_util::Pattern;

struct ChannelKind {
  std::string name;
  bool inproc = false;
  int streams = 1;
  bool local = false;         // TCP: peers connect over Unix domain sockets.
  UcxResources ucx;           // UCX where ucx.tls names its transports.
  bool ofi = false;           // libfabric, tcp;ofi_rxm on loopback.
  bool ofi_register = false;  // libfabric registers every buffer (rxm does not require it).
};
void PrintTo(const ChannelKind& kind, std::ostream* os) { *os << kind.name; }

// n ranks of one transport, fully connected: channels[rank][peer].
struct Links {
  std::shared_ptr<InprocFabric> fabric;
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::vector<std::shared_ptr<Channel>>> channels;  // Destroyed first.
  // Whether every rank connected (a rank that did not has no channels).
  bool connected() const {
    return absl::c_none_of(channels, [](const auto& c) { return c.empty(); });
  }
};

// Creates the transports, then connects them all at once (each ConnectAll waits for its peers).
void ConnectAll(Links& links) {
  std::vector<PeerAddress> peers;
  for (size_t r = 0; r < links.transports.size(); ++r) {
    peers.push_back(PeerAddress{static_cast<int>(r), links.transports[r]->address(),
                                absl::StrFormat("rank %d", r)});
  }
  links.channels.resize(peers.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < peers.size(); ++r) {
    threads.emplace_back([&, r] {
      auto channels = links.transports[r]->ConnectAll(static_cast<int>(r), peers, Soon());
      ASSERT_TRUE(channels.ok()) << channels.status();
      links.channels[r] = *channels;
    });
  }
  for (auto& t : threads) t.join();
}

Links Open(const ChannelKind& kind, int n) {
  Links links;
#ifdef HMC_HAVE_UCX
  if (!kind.ucx.tls.empty()) {
    for (int r = 0; r < n; ++r) {
      UcxTransportConfig config;
      config.token = testing_util::kToken;
      config.world_id = "t";
      config.resources = kind.ucx;
      auto t = UcxTransport::Create(config);
      EXPECT_TRUE(t.ok()) << t.status();
      links.transports.push_back(std::move(*t));
    }
    ConnectAll(links);
    return links;
  }
#endif
#ifdef HMC_HAVE_OFI
  if (kind.ofi) {
    for (int r = 0; r < n; ++r) {
      OfiTransportConfig config;
      config.token = testing_util::kToken;
      config.world_id = "t";
      config.resources = {"tcp;ofi_rxm", "127.0.0.1", kind.ofi_register};
      auto t = OfiTransport::Create(config);
      EXPECT_TRUE(t.ok()) << t.status();
      EXPECT_EQ((*t)->Describe().find("registered buffers") != std::string::npos,
                kind.ofi_register);
      links.transports.push_back(std::move(*t));
    }
    ConnectAll(links);
    return links;
  }
#endif
  if (!kind.inproc) {
    testing_util::Mesh mesh = testing_util::Connect(n, kind.streams, kind.local);
    for (auto& t : mesh.transports) links.transports.push_back(std::move(t));
    links.channels = std::move(mesh.channels);
    return links;
  }
  links.fabric = std::make_shared<InprocFabric>();
  for (int r = 0; r < n; ++r) {
    links.transports.push_back(std::make_unique<InprocTransport>(links.fabric, r));
  }
  ConnectAll(links);
  return links;
}

class ChannelContract : public testing::TestWithParam<ChannelKind> {};

TEST_P(ChannelContract, MessagesOfEverySizeArriveIntactInAnyPostingOrder) {
  Links links = Open(GetParam(), 2);
  ASSERT_TRUE(links.connected());
  uint64_t total = 0;
  for (size_t bytes :
       {size_t{0}, size_t{1}, size_t{4095}, size_t{4097}, size_t{1000003}, size_t{8} << 20}) {
    total += bytes;
    ExchangeBothWays(links, 100 + 2 * bytes, bytes, bytes, /*up_to=*/false);
  }
  EXPECT_EQ(links.channels[0][1]->stats().bytes_sent, total);
  EXPECT_EQ(links.channels[1][0]->stats().bytes_received, total);
  EXPECT_EQ(links.channels[0][1]->stats().messages_sent, 6u);
  EXPECT_EQ(links.channels[1][0]->stats().messages_received, 6u);
#ifdef HMC_HAVE_OFI
  if (GetParam().ofi) {
    // Registered: at least each non-empty message's send and receive; otherwise none.
    const auto& ofi = dynamic_cast<const OfiTransport&>(*links.transports[0]);
    if (GetParam().ofi_register) {
      EXPECT_GE(ofi.registrations(), 10u);
    } else {
      EXPECT_EQ(ofi.registrations(), 0u);
    }
  }
#endif
}

// A receive of any capacity takes a shorter message, reports its length, and counts that length
// (not its capacity) as received.
TEST_P(ChannelContract, ReceiveUpToTakesAnyShorterMessageAndCountsItsLength) {
  Links links = Open(GetParam(), 2);
  ASSERT_TRUE(links.connected());
  constexpr size_t kCapacity = size_t{3} << 20;
  uint64_t total = 0;
  for (size_t bytes : {size_t{0}, size_t{7}, size_t{70000}, size_t{1000003}, kCapacity}) {
    total += bytes;
    ExchangeBothWays(links, 300 + 2 * bytes, bytes, kCapacity, /*up_to=*/true);
  }
  EXPECT_EQ(links.channels[1][0]->stats().bytes_received, total);
  EXPECT_EQ(links.channels[0][1]->stats().bytes_received, total);
}

TEST_P(ChannelContract, ManyTagsInFlightFromSeveralThreads) {
  Links links = Open(GetParam(), 3);
  ASSERT_TRUE(links.connected());
  constexpr int kMessages = 64;
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::vector<uint8_t>> out, in;
      std::vector<RequestPtr> pending;
      for (int peer = 0; peer < 3; ++peer) {
        if (peer == r) continue;
        for (int m = 0; m < kMessages; ++m) {
          const size_t bytes = 1 + (m * 7919) % 70000;
          out.push_back(Pattern(bytes, static_cast<uint8_t>(r * 3 + m)));
          pending.push_back(links.channels[r][peer]->Send(m, out.back().data(), bytes));
          in.emplace_back(bytes);
          pending.push_back(links.channels[r][peer]->Recv(m, in.back().data(), bytes));
        }
      }
      for (auto& p : pending) ASSERT_TRUE(p->Wait(Soon()).ok());
      size_t i = 0;
      for (int peer = 0; peer < 3; ++peer) {
        if (peer == r) continue;
        for (int m = 0; m < kMessages; ++m, ++i) {
          EXPECT_EQ(in[i], Pattern(in[i].size(), static_cast<uint8_t>(peer * 3 + m)));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

// A message whose length differs from its receive's (or exceeds a RecvUpTo's capacity) fails the
// receiver's channel, whichever was posted first: the error names the peer first and both
// lengths, and the channel's later requests fail too.
TEST_P(ChannelContract, ASizeMismatchFailsTheChannelNamingThePeerAndBothLengths) {
  for (const bool up_to : {false, true}) {
    for (const bool receive_first : {true, false}) {
      SCOPED_TRACE(testing::Message() << "up_to " << up_to << ", receive first " << receive_first);
      Links links = Open(GetParam(), 2);
      ASSERT_TRUE(links.connected());
      Channel& sender = *links.channels[0][1];
      Channel& receiver = *links.channels[1][0];
      std::vector<uint8_t> data(100), got(60);
      auto receive = [&] {
        return up_to ? receiver.RecvUpTo(7, got.data(), got.size())
                     : receiver.Recv(7, got.data(), got.size());
      };
      RequestPtr recv = receive_first ? receive() : nullptr;
      RequestPtr send = sender.Send(7, data.data(), data.size());
      send->Wait(Soon()).IgnoreError();  // The data must outlive the send.
      if (!receive_first) {
        absl::SleepFor(absl::Milliseconds(50));  // Arrived unexpected.
        recv = receive();
      }
      const absl::Status s = recv->Wait(Soon());
      ASSERT_FALSE(s.ok());
      EXPECT_TRUE(absl::StartsWith(s.message(), receiver.peer_description())) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "sent 100 bytes")) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), up_to ? "expects at most 60" : "expects 60")) << s;
      EXPECT_FALSE(receiver.status().ok());
      EXPECT_FALSE(receiver.Recv(8, got.data(), 1)->Wait(Soon()).ok());
    }
  }
}

// Close fails the pending and later requests with its reason, and the peer learns the reason.
TEST_P(ChannelContract, CloseFailsPendingAndLaterRequestsAndTellsThePeerWhy) {
  Links links = Open(GetParam(), 2);
  ASSERT_TRUE(links.connected());
  Channel& closing = *links.channels[0][1];
  Channel& peer = *links.channels[1][0];
  std::vector<uint8_t> got(10);
  RequestPtr recv = closing.Recv(1, got.data(), got.size());
  std::thread closer([&] { closing.Close(absl::CancelledError("closing for a test")); });
  const absl::Status s = recv->Wait(Soon());
  closer.join();
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_TRUE(absl::IsCancelled(closing.Send(2, got.data(), 1)->Wait(Soon())));
  EXPECT_TRUE(absl::IsCancelled(closing.status())) << closing.status();
  // A receive the peer posted fails with the reason once it arrives (bounded wait).
  const absl::Status at_peer = peer.Recv(3, got.data(), 1)->Wait(Soon());
  EXPECT_FALSE(at_peer.ok());
  EXPECT_TRUE(absl::StrContains(at_peer.message(), "closing for a test")) << at_peer;
}

// A rank that leaves while its peer stays. The peer answers its goodbye at once, so the leaver's
// shutdown ends cleanly instead of at its deadline; what the leaver sent stays deliverable, and
// the peer's later requests fail naming it. libfabric's peer does not answer before its own
// shutdown (OfiChannel::OnGoodbye): the leaver's shutdown names it.
TEST_P(ChannelContract, ALoneLeaverIsAnsweredAndWhatItSentStaysDeliverable) {
  if (GetParam().inproc) GTEST_SKIP() << "in-process sends are copied eagerly: nothing to close";
  Links links = Open(GetParam(), 2);
  ASSERT_TRUE(links.connected());
  // Small enough to go eagerly: the send completes before any receive is posted.
  const std::vector<uint8_t> data = Pattern(1000, 4);
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE(links.channels[0][1]->Send(9, data.data(), data.size())->Wait(Soon()).ok());
  const bool answered = !GetParam().ofi;
  const absl::Status left =
      links.transports[0]->Shutdown(answered ? Soon() : absl::Now() + absl::Seconds(1));
  if (answered) {
    EXPECT_TRUE(left.ok()) << left;
  } else {
    EXPECT_TRUE(absl::IsDeadlineExceeded(left) && absl::StrContains(left.message(), "rank 1"))
        << left;
  }
  Channel& stayer = *links.channels[1][0];
  ASSERT_TRUE(stayer.Recv(9, got.data(), got.size())->Wait(Soon()).ok());
  EXPECT_EQ(got, data);
  if (!answered) return;  // Its receives stay posted until its own shutdown.
  for (const absl::Status& later : {stayer.Recv(10, got.data(), 1)->Wait(Soon()),
                                    stayer.Send(11, data.data(), 1)->Wait(Soon())}) {
    EXPECT_FALSE(later.ok());
    EXPECT_TRUE(absl::StrContains(later.message(), "rank 0")) << later;
  }
}

// Rank 0 sends `data` (above every eager limit: a rendezvous where the transport has one) with
// `tag` to rank 1, which posts no receive; 300 ms later rank 0's transport is destroyed, and 300 ms
// after that rank 1 has seen its connection close. The send's request.
RequestPtr SendThenDestroyTheSender(Links& links, uint64_t tag, const std::vector<uint8_t>& data) {
  RequestPtr send = links.channels[0][1]->Send(tag, data.data(), data.size());
  absl::SleepFor(absl::Milliseconds(300));  // The peer learns of it (a rendezvous offer).
  links.channels[0].clear();
  links.transports[0].reset();
  absl::SleepFor(absl::Milliseconds(300));  // The peer sees the connection close.
  return send;
}

// A transport destroyed while a send waits for a receive its peer never posted (a call that
// timed out): the send ends, with whatever outcome its transport gives it (TCP and in-process
// sends were already complete), and nothing crashes, on either side. UCX used to abort here: a
// flushing close of the endpoint still held the rendezvous send when the worker went. libfabric
// crashed as the peer's transport went: its link drained the offer of a sender whose connection
// had closed.
TEST_P(ChannelContract, ATransportDestroyedWithASendItsPeerNeverTookEndsIt) {
  Links links = Open(GetParam(), 2);
  ASSERT_TRUE(links.connected());
  const std::vector<uint8_t> data = Pattern(1 << 20, 4);
  RequestPtr send = SendThenDestroyTheSender(links, 9, data);
  EXPECT_FALSE(absl::IsDeadlineExceeded(send->Wait(Soon())));
  links.channels[1].clear();
  links.transports[1].reset();
}

// A receive posted after its sender's transport went, for a message the sender had sent: it ends
// with the message intact or an error naming the sender.
TEST_P(ChannelContract, AReceivePostedAfterItsSenderWentEnds) {
  if (GetParam().ofi) {
    GTEST_SKIP() << "known fault: libfabric 1.17's rxm reads a rendezvous message whose "
                    "connection closed through a null endpoint (SIGSEGV)";
  }
  Links links = Open(GetParam(), 2);
  ASSERT_TRUE(links.connected());
  const std::vector<uint8_t> data = Pattern(1 << 20, 5);
  SendThenDestroyTheSender(links, 9, data);
  std::vector<uint8_t> got(data.size());
  const absl::Status received = links.channels[1][0]->Recv(9, got.data(), got.size())->Wait(Soon());
  if (received.ok()) {
    EXPECT_EQ(got, data);
  } else {
    EXPECT_FALSE(absl::IsDeadlineExceeded(received)) << received;
    EXPECT_TRUE(absl::StrContains(received.message(), "rank 0")) << received;
  }
}

// What a communicator does when a membership epoch ends: tags below the floor are abandoned.
// Pending receives fail with the reason; a message that arrived, or arrives later, is dropped (a
// receive posted for it fails) and frees its memory; sends complete (the peer drops them); a
// message above the floor, sent after the dropped ones on the same streams, arrives intact.
TEST_P(ChannelContract, TagsBelowTheFloorAreAbandoned) {
  Links links = Open(GetParam(), 2);
  ASSERT_TRUE(links.connected());
  Channel& to_one = *links.channels[0][1];
  Channel& from_zero = *links.channels[1][0];
  constexpr uint64_t kFloor = 1000;
  const absl::Status why = absl::AbortedError("epoch 1 ended");
  const absl::Time deadline = Soon();
  const std::vector<uint8_t> old = Pattern(1 << 20, 1), late = Pattern(1 << 20, 2),
                             fresh = Pattern(3 << 20, 3);
  std::vector<uint8_t> got_pending(1 << 20), got_late(1 << 20), got_fresh(3 << 20);
  RequestPtr send_old = to_one.Send(5, old.data(), old.size());  // Arrives unexpected.
  RequestPtr pending = from_zero.Recv(6, got_pending.data(), got_pending.size());
  absl::SleepFor(absl::Milliseconds(100));
  from_zero.DiscardTagsBelow(kFloor, why);
  EXPECT_EQ(pending->Wait(deadline), why);
  EXPECT_FALSE(absl::IsDeadlineExceeded(send_old->Wait(deadline)));  // Sent, or refused.
  RequestPtr send_late = to_one.Send(7, late.data(), late.size());
  EXPECT_FALSE(absl::IsDeadlineExceeded(send_late->Wait(deadline)));
  EXPECT_EQ(from_zero.Recv(5, got_late.data(), got_late.size())->Wait(deadline), why);
  EXPECT_EQ(from_zero.Recv(7, got_late.data(), got_late.size())->Wait(deadline), why);
  RequestPtr recv_fresh = from_zero.Recv(kFloor + 1, got_fresh.data(), got_fresh.size());
  ASSERT_TRUE(to_one.Send(kFloor + 1, fresh.data(), fresh.size())->Wait(deadline).ok());
  ASSERT_TRUE(recv_fresh->Wait(deadline).ok());
  EXPECT_EQ(got_fresh, fresh);
  EXPECT_TRUE(from_zero.status().ok());
  // The sender's side abandons its own sends below the floor at once.
  to_one.DiscardTagsBelow(kFloor, why);
  EXPECT_EQ(to_one.Send(8, old.data(), old.size())->Wait(deadline), why);
}

// Messages below the floor of every size up to the longest a provider sends eagerly, arriving
// after the floor rose: each is dropped, and the link stands. libfabric's drains used to take
// them into 64 bytes, and rxm over tcp broke the connection on such a truncation (the next send
// failed "Transport endpoint is not connected"), which removed a healthy member after a fault.
TEST_P(ChannelContract, ShortMessagesBelowTheFloorAreDroppedAndTheLinkStands) {
  Links links = Open(GetParam(), 2);
  ASSERT_TRUE(links.connected());
  Channel& to_one = *links.channels[0][1];
  Channel& from_zero = *links.channels[1][0];
  const absl::Time deadline = Soon();
  uint64_t floor = 1000;
  for (size_t bytes : {size_t{100}, size_t{4000}, size_t{16 << 10}, size_t{60000}}) {
    SCOPED_TRACE(absl::StrCat(bytes, " bytes"));
    from_zero.DiscardTagsBelow(floor, absl::AbortedError("epoch ended"));
    absl::SleepFor(absl::Milliseconds(50));  // The drains are posted before the message comes.
    const std::vector<uint8_t> old = Pattern(bytes, 6), fresh = Pattern(bytes, 7);
    std::vector<uint8_t> got(bytes);
    EXPECT_FALSE(
        absl::IsDeadlineExceeded(to_one.Send(floor - 1, old.data(), bytes)->Wait(deadline)));
    RequestPtr receive = from_zero.Recv(floor, got.data(), bytes);
    ASSERT_TRUE(to_one.Send(floor, fresh.data(), bytes)->Wait(deadline).ok());
    ASSERT_TRUE(receive->Wait(deadline).ok());
    EXPECT_EQ(got, fresh);
    floor += 1000;
  }
  EXPECT_TRUE(to_one.status().ok()) << to_one.status();
  EXPECT_TRUE(from_zero.status().ok()) << from_zero.status();
}

std::vector<ChannelKind> EveryKind() {
  std::vector<ChannelKind> kinds = {
      {"inproc", true},
      {"tcp_1_stream", false, 1, false},
      {"tcp_4_streams", false, 4, false},
      {"unix_1_stream", false, 1, true},
      {"unix_4_streams", false, 4, true},
  };
#ifdef HMC_HAVE_UCX
  kinds.push_back({"ucx_tcp", false, 1, false, {"tcp", "lo"}});
#endif
#ifdef HMC_HAVE_OFI
  kinds.push_back({"ofi_tcp_rxm", false, 1, false, {}, true});
  kinds.push_back({"ofi_tcp_rxm_registered", false, 1, false, {}, true, true});
#endif
  return kinds;
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, ChannelContract, testing::ValuesIn(EveryKind()),
                         [](const testing::TestParamInfo<ChannelKind>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace hmc
