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

}  // namespace

absl::StatusOr<int> RunRanks(std::vector<RankProcess> specs, const GroupRunSettings& settings,
                             std::optional<ServiceProcess> service) {
  SignalCatcher catcher;
  Running served;  // The service, when there is one.
  if (service.has_value()) {
    served.spec = {.command = std::move(service->restart), .name = std::move(service->name)};
    served.process.emplace(std::move(service->process));
  }
  // Once no rank runs; bounded by the grace period.
  auto stop_service = [&] {
    if (!served.process.has_value() || served.exited) return;
    served.Stop(SIGTERM);
    if (!served.process->Wait(absl::Now() + settings.grace).ok()) {
      served.Stop(SIGKILL);
      served.process->Wait(absl::Now() + absl::Seconds(5)).IgnoreError();
    }
    served.exited = true;
  };
  // Starts the service again when it died while ranks still run.
  auto watch_service = [&](size_t running_ranks) {
    int code;
    if (!served.process.has_value() || served.exited || !served.process->Poll(&code)) return;
    served.exited = true;
    if (running_ranks == 0 || code == 0) return;  // 0: it saw every rank leave.
    if (!settings.restart_on_failure || served.restarts >= settings.max_restarts) {
      Logf("hmcrun", "%s exited with status %d and is not restarted; the ranks go on without it",
           served.spec.name, code);
      return;
    }
    ++served.restarts;
    if (absl::Status s = StartRank(served); !s.ok()) {
      Logf("hmcrun", "%s exited with status %d and cannot be restarted: %s", served.spec.name, code,
           s.message());
      return;
    }
    served.exited = false;
    Logf("hmcrun",
         "%s exited with status %d; restarted it at the same address as pid %d (restart %d of %d)",
         served.spec.name, code, served.process->pid(), served.restarts, settings.max_restarts);
  };
  std::vector<Running> ranks(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    ranks[i].spec = std::move(specs[i]);
    if (absl::Status s = StartRank(ranks[i]); !s.ok()) {
      for (size_t j = 0; j < i; ++j) ranks[j].Stop(SIGKILL);
      return s;
    }
  }
  const absl::Time deadline = absl::Now() + settings.timeout;
  std::optional<int> result;
  absl::Time kill_at = absl::InfiniteFuture();
  int forwarded = 0;
  auto stop_all = [&](int signal) {
    for (Running& r : ranks) {
      if (!r.exited) r.Stop(signal);
    }
  };
  size_t running = ranks.size();
  absl::Time drain_until = absl::InfiniteFuture();
  const int max_total_restarts = settings.max_total_restarts > 0
                                     ? settings.max_total_restarts
                                     : settings.max_restarts * static_cast<int>(ranks.size());
  int total_restarts = 0;
  bool someone_finished = false;  // A rank exited 0: the job is ending, nobody is restarted.
  // What to do about a rank that failed; true when it was started again.
  auto restart = [&](Running& r, int code) {
    if (!settings.restart_on_failure || result.has_value() || someone_finished ||
        r.restarts >= settings.max_restarts || total_restarts >= max_total_restarts) {
      return false;
    }
    // What the failed process wrote last, before its pipe is replaced (bounded: a grandchild
    // may hold the pipe open).
    for (int i = 0; i < 64 && r.output.valid(); ++i) r.Drain();
    ++r.restarts;
    ++total_restarts;
    Logf("hmcrun", "%s exited with status %d; restarting it (restart %d of %d, %d in all)",
         r.spec.name, code, r.restarts, settings.max_restarts, total_restarts);
    r.output.Reset();
    r.partial.clear();
    if (absl::Status s = StartRank(r); !s.ok()) {
      Logf("hmcrun", "%s", s.message());
      return false;
    }
    r.exited = false;
    ++running;
    return true;
  };
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Running*> owners;
    for (Running& r : ranks) {
      if (r.output.valid()) {
        fds.push_back({r.output.get(), POLLIN, 0});
        owners.push_back(&r);
      }
    }
    if (running == 0 && (fds.empty() || absl::Now() >= drain_until)) break;
    poll(fds.data(), fds.size(), 20);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) owners[i]->Drain();
    }
    for (Running& r : ranks) {
      int code;
      if (r.exited || !r.process->Poll(&code)) continue;
      r.exited = true;
      r.stdin_write.Reset();
      --running;
      // Grandchildren may keep a pipe open: output is drained for at most two seconds more.
      if (running == 0) drain_until = absl::Now() + absl::Seconds(2);
      if (code == 0) someone_finished = true;
      if (code != 0 && restart(r, code)) continue;
      if (code != 0 && !result.has_value() && settings.restart_on_failure &&
          settings.min_running > 0 && static_cast<int>(running) >= settings.min_running) {
        Logf("hmcrun", "%s exited with status %d and is not restarted; %d ranks go on", r.spec.name,
             code, running);
        continue;
      }
      if (code != 0 && !result.has_value()) {
        result = code;
        Logf("hmcrun", "%s exited with status %d; stopping the others", r.spec.name, code);
        stop_all(SIGTERM);
        kill_at = absl::Now() + settings.grace;
      }
    }
    watch_service(running);
    if (g_signal_count > forwarded) {
      forwarded = g_signal_count;
      const int signal = forwarded > 1 ? SIGKILL : static_cast<int>(g_signal);
      Logf("hmcrun", "got signal %d; forwarding %s to every rank", static_cast<int>(g_signal),
           signal == SIGKILL ? "SIGKILL" : strsignal(signal));
      if (!result.has_value()) result = 128 + static_cast<int>(g_signal);
      stop_all(signal);
      kill_at = std::min(kill_at, absl::Now() + settings.grace);
    }
    const absl::Time now = absl::Now();
    if (now >= kill_at) {
      stop_all(SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
    if (now >= deadline && running > 0) {
      stop_all(SIGKILL);
      for (Running& r : ranks) r.process->Wait(absl::Now() + absl::Seconds(5)).IgnoreError();
      stop_service();
      return absl::DeadlineExceededError(
          absl::StrFormat("the group ran past its timeout of %s; killed every rank",
                          absl::FormatDuration(settings.timeout)));
    }
  }
  stop_service();
  return result.value_or(0);
}

}  // namespace hmc
