#include "launcher/group_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/socket.h"
#include "launcher/process.h"

namespace hmc {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_signal_count = 0;

void OnSignal(int signal) {
  g_signal = signal;
  g_signal_count = g_signal_count + 1;
}

// Installs the forwarding handlers (and ignores SIGPIPE) for its lifetime.
class SignalCatcher {
 public:
  SignalCatcher() {
    g_signal = 0;
    g_signal_count = 0;
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
    // A rank that died before reading its stdin must not take this process with it.
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &old_pipe_);
  }
  ~SignalCatcher() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
  }

 private:
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
  struct sigaction old_pipe_ = {};
};

void WriteLine(const std::string& label, absl::string_view line) {
  const std::string out = absl::StrCat(label, " ", line, "\n");
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

// One running rank: its process, the read end of its output pipe, the write end of its stdin.
struct Running {
  RankProcess spec;
  std::optional<Process> process;
  UniqueFd output;
  UniqueFd stdin_write;
  std::string partial;  // Output after the last newline.
  bool exited = false;
  int restarts = 0;

  // Writes the whole lines that are there; at end of file, the rest too, and closes the pipe.
  void Drain() {
    char buffer[16384];
    const ssize_t n = read(output.get(), buffer, sizeof(buffer));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      if (!partial.empty()) WriteLine(spec.label, partial);
      partial.clear();
      output.Reset();
      return;
    }
    partial.append(buffer, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl = partial.find('\n'); nl != std::string::npos; nl = partial.find('\n', start)) {
      WriteLine(spec.label, absl::string_view(partial).substr(start, nl - start));
      start = nl + 1;
    }
    partial.erase(0, start);
  }

  void Stop(int signal) {
    stdin_write.Reset();  // An ssh rank's remote watcher sees EOF and stops the program.
    process->Signal(signal);
  }
};

absl::Status StartRank(Running& r) {
  ProcessIo io;
  UniqueFd output_write;
  UniqueFd stdin_read;
  if (!r.spec.label.empty()) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
    r.output = UniqueFd(fds[0]);
    output_write = UniqueFd(fds[1]);
    fcntl(r.output.get(), F_SETFL, O_NONBLOCK);
    io.output_fd = output_write.get();
  }
  if (r.spec.command.stdin_pipe) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
    stdin_read = UniqueFd(fds[0]);
    r.stdin_write = UniqueFd(fds[1]);
    io.input_fd = stdin_read.get();
  }
  absl::StatusOr<Process> p = Process::Spawn(r.spec.command.argv, r.spec.command.env, io);
  if (!p.ok()) {
    return absl::Status(p.status().code(),
                        absl::StrCat("cannot start ", r.spec.name, ": ", p.status().message()));
  }
  r.process.emplace(std::move(*p));
  if (!r.spec.command.stdin_text.empty()) {
    // A pipe holds 64 KiB: one short line never blocks.
    const std::string& text = r.spec.command.stdin_text;
    if (write(r.stdin_write.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      return absl::InternalError(absl::StrCat("cannot write to ", r.spec.name, "'s stdin"));
    }
  }
  return absl::OkStatus();
}

// The group's ranks and service while they run: RunRanks's state and its steps.
class GroupSupervisor {
 public:
  GroupSupervisor(const GroupRunSettings& settings, std::optional<ServiceProcess> service)
      : settings_(settings) {
    if (service.has_value()) {
      served_.spec = {.command = std::move(service->restart), .name = std::move(service->name)};
      served_.process.emplace(std::move(service->process));
    }
  }

  absl::Status Start(std::vector<RankProcess> specs) {
    ranks_.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      ranks_[i].spec = std::move(specs[i]);
      if (absl::Status s = StartRank(ranks_[i]); !s.ok()) {
        for (size_t j = 0; j < i; ++j) ranks_[j].Stop(SIGKILL);
        return s;
      }
    }
    running_ = ranks_.size();
    max_total_restarts_ = settings_.max_total_restarts > 0
                              ? settings_.max_total_restarts
                              : settings_.max_restarts * static_cast<int>(ranks_.size());
    return absl::OkStatus();
  }

  absl::StatusOr<int> Wait() {
    const absl::Time deadline = absl::Now() + settings_.timeout;
    while (running_ > 0 || !DrainedAfterTheEnd()) {
      ForwardOutput();
      CollectExits();
      WatchService();
      ForwardSignals();
      const absl::Time now = absl::Now();
      if (now >= kill_at_) {
        StopAll(SIGKILL);
        kill_at_ = absl::InfiniteFuture();
      }
      if (now >= deadline && running_ > 0) {
        StopAll(SIGKILL);
        for (Running& r : ranks_) r.process->Wait(absl::Now() + absl::Seconds(5)).IgnoreError();
        StopService();
        return absl::DeadlineExceededError(
            absl::StrFormat("the group ran past its timeout of %s; killed every rank",
                            absl::FormatDuration(settings_.timeout)));
      }
    }
    StopService();
    return result_.value_or(0);
  }

 private:
  // Once no rank runs: whether their output is all written (grandchildren may keep a pipe open:
  // it is drained for at most two seconds more).
  bool DrainedAfterTheEnd() const {
    if (absl::Now() >= drain_until_) return true;
    for (const Running& r : ranks_) {
      if (r.output.valid()) return false;
    }
    return true;
  }

  // Writes what the ranks wrote, waiting up to 20 ms for it.
  void ForwardOutput() {
    std::vector<pollfd> fds;
    std::vector<Running*> owners;
    for (Running& r : ranks_) {
      if (r.output.valid()) {
        fds.push_back({r.output.get(), POLLIN, 0});
        owners.push_back(&r);
      }
    }
    poll(fds.data(), fds.size(), 20);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) owners[i]->Drain();
    }
  }

  // Ranks that exited: restarted, given up on while enough run, or the end of the group.
  void CollectExits() {
    for (Running& r : ranks_) {
      int code;
      if (r.exited || !r.process->Poll(&code)) continue;
      r.exited = true;
      r.stdin_write.Reset();
      --running_;
      if (running_ == 0) drain_until_ = absl::Now() + absl::Seconds(2);
      if (code == 0) someone_finished_ = true;
      if (code == 0 || result_.has_value() || Restart(r, code)) continue;
      if (settings_.restart_on_failure && settings_.min_running > 0 &&
          static_cast<int>(running_) >= settings_.min_running) {
        Logf("hmcrun", "%s exited with status %d and is not restarted; %d ranks go on", r.spec.name,
             code, running_);
        continue;
      }
      result_ = code;
      Logf("hmcrun", "%s exited with status %d; stopping the others", r.spec.name, code);
      StopAll(SIGTERM);
      kill_at_ = absl::Now() + settings_.grace;
    }
  }

  // True when the failed rank was started again.
  bool Restart(Running& r, int code) {
    if (!settings_.restart_on_failure || someone_finished_ ||
        r.restarts >= settings_.max_restarts || total_restarts_ >= max_total_restarts_) {
      return false;
    }
    // What the failed process wrote last, before its pipe is replaced (bounded: a grandchild
    // may hold the pipe open).
    for (int i = 0; i < 64 && r.output.valid(); ++i) r.Drain();
    ++r.restarts;
    ++total_restarts_;
    Logf("hmcrun", "%s exited with status %d; restarting it (restart %d of %d, %d in all)",
         r.spec.name, code, r.restarts, settings_.max_restarts, total_restarts_);
    r.output.Reset();
    r.partial.clear();
    if (absl::Status s = StartRank(r); !s.ok()) {
      Logf("hmcrun", "%s", s.message());
      return false;
    }
    r.exited = false;
    ++running_;
    return true;
  }

  // SIGINT and SIGTERM to this process go to every rank; a second one kills.
  void ForwardSignals() {
    if (g_signal_count <= forwarded_) return;
    forwarded_ = g_signal_count;
    const int signal = forwarded_ > 1 ? SIGKILL : static_cast<int>(g_signal);
    Logf("hmcrun", "got signal %d; forwarding %s to every rank", static_cast<int>(g_signal),
         signal == SIGKILL ? "SIGKILL" : strsignal(signal));
    if (!result_.has_value()) result_ = 128 + static_cast<int>(g_signal);
    StopAll(signal);
    kill_at_ = std::min(kill_at_, absl::Now() + settings_.grace);
  }

  void StopAll(int signal) {
    for (Running& r : ranks_) {
      if (!r.exited) r.Stop(signal);
    }
  }

  // Starts the service again when it died while ranks still run.
  void WatchService() {
    int code;
    if (!served_.process.has_value() || served_.exited || !served_.process->Poll(&code)) return;
    served_.exited = true;
    if (running_ == 0 || code == 0) return;  // 0: it saw every rank leave.
    if (!settings_.restart_on_failure || served_.restarts >= settings_.max_restarts) {
      Logf("hmcrun", "%s exited with status %d and is not restarted; the ranks go on without it",
           served_.spec.name, code);
      return;
    }
    ++served_.restarts;
    if (absl::Status s = StartRank(served_); !s.ok()) {
      Logf("hmcrun", "%s exited with status %d and cannot be restarted: %s", served_.spec.name,
           code, s.message());
      return;
    }
    served_.exited = false;
    Logf("hmcrun",
         "%s exited with status %d; restarted it at the same address as pid %d (restart %d of %d)",
         served_.spec.name, code, served_.process->pid(), served_.restarts, settings_.max_restarts);
  }

  // Once no rank runs; bounded by the grace period.
  void StopService() {
    if (!served_.process.has_value() || served_.exited) return;
    served_.Stop(SIGTERM);
    if (!served_.process->Wait(absl::Now() + settings_.grace).ok()) {
      served_.Stop(SIGKILL);
      served_.process->Wait(absl::Now() + absl::Seconds(5)).IgnoreError();
    }
    served_.exited = true;
  }

  const GroupRunSettings& settings_;
  Running served_;  // The service, when there is one.
  std::vector<Running> ranks_;
  size_t running_ = 0;
  std::optional<int> result_;
  absl::Time kill_at_ = absl::InfiniteFuture();
  absl::Time drain_until_ = absl::InfiniteFuture();
  int forwarded_ = 0;
  int max_total_restarts_ = 0;
  int total_restarts_ = 0;
  bool someone_finished_ = false;  // A rank exited 0: the job is ending, nobody is restarted.
};

}  // namespace

absl::StatusOr<int> RunRanks(std::vector<RankProcess> specs, const GroupRunSettings& settings,
                             std::optional<ServiceProcess> service) {
  SignalCatcher catcher;
  GroupSupervisor group(settings, std::move(service));
  if (absl::Status s = group.Start(std::move(specs)); !s.ok()) return s;
  return group.Wait();
}

}  // namespace hmc
