#ifndef HMC_LAUNCHER_PROCESS_H_
#define HMC_LAUNCHER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hmc {

// Where a child's standard streams go; by default they are the parent's.
struct ProcessIo {
  std::string output_path;  // Receives stdout and stderr (created or truncated).
  int output_fd = -1;       // Or: stdout and stderr go to this descriptor (e.g. a pipe).
  int input_fd = -1;        // stdin comes from this descriptor.
};

// A child process started with fork+exec, stopped by PID.
class Process {
 public:
  // Starts argv[0] (searched in PATH when it has no slash) with the current environment plus
  // `env` ("NAME=value" entries override inherited ones). The parent keeps its copies of the
  // descriptors in `io`.
  static absl::StatusOr<Process> Spawn(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env,
                                       const ProcessIo& io = {});
  Process(Process&& other) noexcept : pid_(other.pid_), exit_status_(other.exit_status_) {
    other.pid_ = -1;
  }
  Process& operator=(Process&&) = delete;
  ~Process();  // Kills and reaps a child still running.

  pid_t pid() const { return pid_; }
  // Waits for exit until the deadline: the exit code, 128+signal for a signal, or
  // DeadlineExceeded (the child keeps running).
  absl::StatusOr<int> Wait(absl::Time deadline);
  // Non-blocking: true once exited (its code in *exit_code).
  bool Poll(int* exit_code);
  void Signal(int signal);

 private:
  explicit Process(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  int exit_status_ = -1;  // Set once reaped.
};

// The path of the running program (/proc/self/exe), or `fallback` if it cannot be read.
std::string SelfExecutable(const std::string& fallback);

// Converts a wait status to an exit code (128+signal for signals).
int ExitCodeOf(int wait_status);

}  // namespace hmc

#endif  // HMC_LAUNCHER_PROCESS_H_
