#include "perf/wanem/forwarder.h"

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/hash/hash.h"
#include "absl/strings/str_format.h"

namespace hmc::wanem {
namespace {

constexpr size_t kMaxPacket = 65536;

}  // namespace

// The flow of a packet: addresses, protocol and, for TCP and UDP, ports (the 5-tuple).
uint64_t FlowOf(const uint8_t* packet, size_t length) {
  const size_t header = (packet[0] & 0x0f) * 4u;
  const uint8_t protocol = packet[9];
  uint32_t ports = 0;
  if ((protocol == IPPROTO_TCP || protocol == IPPROTO_UDP) && length >= header + 4) {
    std::memcpy(&ports, packet + header, 4);
  }
  uint64_t addresses;
  std::memcpy(&addresses, packet + 12, 8);
  return absl::HashOf(addresses, protocol, ports);
}

std::string HostAddress(int index) {
  return absl::StrFormat("10.201.%d.%d", index / 250, index % 250 + 1);
}

int HostIndexOf(uint32_t address_be) {
  const uint32_t a = ntohl(address_be);
  if ((a >> 16) != ((10u << 8) | 201u)) return -1;
  const int high = static_cast<int>((a >> 8) & 0xff), low = static_cast<int>(a & 0xff);
  if (low < 1 || low > 250) return -1;
  return high * 250 + low - 1;
}

Forwarder::Forwarder(LinkModel model, std::vector<UniqueFd> tuns)
    : model_(std::move(model)), tuns_(std::move(tuns)) {}

void Forwarder::ReadFrom(int from) {
  // A bounded batch per wake-up so that one busy host cannot starve the others.
  static thread_local std::vector<uint8_t> buffer(kMaxPacket);
  for (int i = 0; i < 64; ++i) {
    const ssize_t n = read(tuns_[from].get(), buffer.data(), buffer.size());
    if (n <= 0) return;
    std::vector<uint8_t> packet(buffer.begin(), buffer.begin() + n);
    if (n < 20 || (packet[0] >> 4) != 4) {
      ++malformed_;
      continue;
    }
    uint32_t destination;
    std::memcpy(&destination, packet.data() + 16, 4);
    const int to = HostIndexOf(destination);
    if (to < 0 || to >= static_cast<int>(tuns_.size())) {
      ++malformed_;
      continue;
    }
    const uint64_t id =
        model_.Admit(from, to, FlowOf(packet.data(), packet.size()), packet.size(), absl::Now());
    if (id != 0) in_model_.emplace(id, Pending{to, std::move(packet)});
  }
}

void Forwarder::ReleaseDue(absl::Time now) {
  outcomes_.clear();
  model_.Advance(now, &outcomes_);
  for (const LinkModel::Outcome& o : outcomes_) {
    auto it = in_model_.find(o.id);
    if (!o.dropped) {
      in_flight_.push(
          InFlight{o.release, sequence_++, it->second.to, std::move(it->second.packet)});
    }
    in_model_.erase(it);
  }
  while (!in_flight_.empty() && in_flight_.top().release <= now) {
    const InFlight& p = in_flight_.top();
    // A full device queue drops the packet, as a real interface would.
    const ssize_t ignored = write(tuns_[p.to].get(), p.packet.data(), p.packet.size());
    (void)ignored;
    in_flight_.pop();
  }
}

void Forwarder::WriteCounters(const std::string& path) const {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << "# from to packets bytes queue_drops random_losses\n";
    const int n = static_cast<int>(tuns_.size());
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        const LinkModel::Counters& c = model_.counters(a, b);
        if (c.packets == 0) continue;
        out << a << ' ' << b << ' ' << c.packets << ' ' << c.bytes << ' ' << c.queue_drops << ' '
            << c.random_losses << '\n';
      }
    }
    out << "# malformed " << malformed_ << '\n';
  }
  std::rename(temporary.c_str(), path.c_str());
}

void Forwarder::ApplyControl(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  uint64_t generation = 0;
  if (!(in >> word >> generation) || word != "generation") return;
  model_.ClearOverrides();
  int from, to;
  double loss, flow_bps;
  while (in >> from >> to >> loss >> flow_bps) {
    const int hosts = static_cast<int>(tuns_.size());
    if (from >= 0 && from < hosts && to >= 0 && to < hosts) {
      model_.Override(from, to, loss, flow_bps);
    }
  }
  const std::string temporary = path + ".applied.tmp";
  std::ofstream(temporary) << generation << '\n';
  std::rename(temporary.c_str(), (path + ".applied").c_str());
}

absl::Status Forwarder::Run(const std::atomic<bool>& stop, const std::string& counters_path,
                            const std::string& control_path) {
  UniqueFd epoll(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return absl::InternalError("epoll_create1 failed");
  for (size_t i = 0; i < tuns_.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    epoll_ctl(epoll.get(), EPOLL_CTL_ADD, tuns_[i].get(), &ev);
  }
  absl::Time next_counters = absl::Now();
  absl::Time next_control = absl::Now();
  int64_t control_stamp = -1;  // The control file's modification time when last applied.
  epoll_event events[64];
  while (!stop.load()) {
    absl::Time wake = absl::Now() + absl::Milliseconds(100);
    if (!in_flight_.empty()) wake = std::min(wake, in_flight_.top().release);
    if (std::optional<absl::Time> next = model_.NextEvent()) wake = std::min(wake, *next);
    const absl::Duration wait = std::max(absl::ZeroDuration(), wake - absl::Now());
    const timespec timeout = absl::ToTimespec(std::min(wait, absl::Milliseconds(100)));
    const int n = epoll_pwait2(epoll.get(), events, 64, &timeout, nullptr);
    if (n < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrFormat("epoll_pwait2: %s", std::strerror(errno)));
    }
    for (int i = 0; i < n; ++i) ReadFrom(static_cast<int>(events[i].data.u64));
    const absl::Time now = absl::Now();
    ReleaseDue(now);
    if (!counters_path.empty() && now >= next_counters) {
      WriteCounters(counters_path);
      next_counters = now + absl::Seconds(1);
    }
    if (!control_path.empty() && now >= next_control) {
      // A changed file is a new set of overrides; looked at ten times a second.
      struct stat st {};
      if (stat(control_path.c_str(), &st) == 0 &&
          st.st_mtim.tv_nsec + st.st_mtim.tv_sec * 1000000000L != control_stamp) {
        control_stamp = st.st_mtim.tv_nsec + st.st_mtim.tv_sec * 1000000000L;
        ApplyControl(control_path);
      }
      next_control = now + absl::Milliseconds(100);
    }
  }
  if (!counters_path.empty()) WriteCounters(counters_path);
  return absl::OkStatus();
}

}  // namespace hmc::wanem
