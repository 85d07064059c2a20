#ifndef HMC_LAUNCHER_RANK_COMMAND_H_
#define HMC_LAUNCHER_RANK_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launcher/inventory.h"

namespace hmc {

// One rank's place in the group.
struct RankPlacement {
  int rank = 0;
  const InventoryHost* host = nullptr;
  int local_rank = 0;  // Among the ranks on the same machine (every local and netns host is
  int local_size = 1;  // this one), e.g. to share its cores.
};

// Fills each host's slots in inventory order (mpirun's "by slot"): the first `np` slots, or all
// of them when np is 0. More ranks than slots is an error naming both counts.
absl::StatusOr<std::vector<RankPlacement>> PlaceRanks(const Inventory& inventory, int np);

// What to execute for one rank, and whether it needs a stdin pipe that stays open while it runs
// (ssh: closing it stops the remote program; see BuildRankCommand).
struct RankCommand {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // Set in the spawned process ("NAME=value").
  bool stdin_pipe = false;
  std::string stdin_text;  // Written to the pipe first (ssh: the token, kept off command lines).
};

struct RemoteSettings {
  std::string remote_path;  // The program's path on ssh hosts; empty: the same absolute path.
  std::string working_dir;  // cd'ed into on ssh hosts when it exists there.
};

// Builds the command that starts `program` with `env` on the rank's host:
// - local: the program itself;
// - netns: `ip netns exec NAME program…` (needs root);
// - ssh: `ssh -o BatchMode=yes [-p port] [-l user] [-i ansible_ssh_private_key_file]
//   [ansible_ssh_common_args] address SCRIPT`, where SCRIPT reads HMC_TOKEN from its stdin (a
//   token on a command line would show in `ps` on both machines), exports the rest of `env`,
//   starts the program in the background and kills it when the session's stdin closes, so
//   stopping the local ssh client stops the remote rank (without a terminal sshd sends it no
//   hangup).
RankCommand BuildRankCommand(const InventoryHost& host, const std::vector<std::string>& program,
                             const std::vector<std::string>& env, const RemoteSettings& remote);

// 'text' quoted for a POSIX shell.
std::string ShellQuote(absl::string_view text);

// Whether `name` may name an environment variable in a shell assignment ([A-Za-z_][A-Za-z0-9_]*):
// -x names travel into the ssh ranks' remote script, where anything else would be code.
bool IsVariableName(absl::string_view name);

}  // namespace hmc

#endif  // HMC_LAUNCHER_RANK_COMMAND_H_
