#include "launcher/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "absl/strings/str_format.h"

extern char** environ;

namespace hmc {

std::string SelfExecutable(const std::string& fallback) {
  char self[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  return len > 0 ? std::string(self, static_cast<size_t>(len)) : fallback;
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 255;
}

absl::StatusOr<Process> Process::Spawn(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env, const ProcessIo& io) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry;
  }
  for (const std::string& entry : env) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrFormat("environment entry '%s' has no '='", entry));
    }
    merged[entry.substr(0, eq)] = entry;
  }
  // Everything the child needs is built before fork: only async-signal-safe calls follow it.
  std::vector<std::string> env_strings;
  for (auto& [name, entry] : merged) env_strings.push_back(entry);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> c_argv;
  for (std::string& a : args) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  int opened_fd = -1;
  if (!io.output_path.empty()) {
    opened_fd = open(io.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (opened_fd < 0) {
      return absl::InternalError(
          absl::StrFormat("cannot open %s: %s", io.output_path, std::strerror(errno)));
    }
  }
  const int output_fd = opened_fd >= 0 ? opened_fd : io.output_fd;
  const pid_t pid = fork();
  if (pid < 0) {
    if (opened_fd >= 0) close(opened_fd);
    return absl::InternalError(absl::StrFormat("fork: %s", std::strerror(errno)));
  }
  if (pid == 0) {
    if (output_fd >= 0) {
      dup2(output_fd, STDOUT_FILENO);
      dup2(output_fd, STDERR_FILENO);
    }
    if (io.input_fd >= 0) dup2(io.input_fd, STDIN_FILENO);
    execvpe(c_argv[0], c_argv.data(), envp.data());
    const char message[] = "hmc: exec failed\n";
    const ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);
    (void)ignored;
    _exit(127);
  }
  if (opened_fd >= 0) close(opened_fd);
  return Process(pid);
}

Process::~Process() {
  if (pid_ > 0 && exit_status_ < 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool Process::Poll(int* exit_code) {
  if (exit_status_ >= 0) {
    *exit_code = exit_status_;
    return true;
  }
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = ExitCodeOf(status);
    *exit_code = exit_status_;
    return true;
  }
  return false;
}

absl::StatusOr<int> Process::Wait(absl::Time deadline) {
  int code;
  absl::Duration nap = absl::Milliseconds(1);
  while (!Poll(&code)) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat("process %d still running", pid_));
    }
    absl::SleepFor(nap);
    nap = std::min(nap * 2, absl::Milliseconds(50));
  }
  return code;
}

void Process::Signal(int signal) {
  if (pid_ > 0 && exit_status_ < 0) kill(pid_, signal);
}

}  // namespace hmc
