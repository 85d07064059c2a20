#include "launcher/rank_command.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace hmc {

absl::StatusOr<std::vector<RankPlacement>> PlaceRanks(const Inventory& inventory, int np) {
  const int slots = inventory.slots();
  if (np < 0 || np > slots) {
    return absl::InvalidArgumentError(
        absl::StrFormat("-np %d: the inventory has %d slots (add hosts or slots=N)", np, slots));
  }
  const int ranks = np == 0 ? slots : np;
  std::vector<RankPlacement> placements;
  for (const InventoryHost& host : inventory.hosts) {
    const int on_host = std::min(host.slots, ranks - static_cast<int>(placements.size()));
    for (int i = 0; i < on_host; ++i) {
      placements.push_back({static_cast<int>(placements.size()), &host});
    }
  }
  // Local ranks count per machine: local and network-namespace hosts all run on this one.
  std::map<std::string, int> per_machine;
  auto machine = [](const InventoryHost& h) {
    return h.connection == Connection::kSsh ? h.address : std::string();
  };
  for (RankPlacement& p : placements) p.local_rank = per_machine[machine(*p.host)]++;
  for (RankPlacement& p : placements) p.local_size = per_machine[machine(*p.host)];
  return placements;
}

std::string ShellQuote(absl::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

namespace {

constexpr char kTokenVariable[] = "HMC_TOKEN";

// `env` without the token, and the token (empty: none).
std::pair<std::vector<std::string>, std::string> SplitToken(const std::vector<std::string>& env) {
  std::pair<std::vector<std::string>, std::string> split;
  const std::string prefix = absl::StrCat(kTokenVariable, "=");
  for (const std::string& entry : env) {
    if (absl::StartsWith(entry, prefix)) {
      split.second = entry.substr(prefix.size());
    } else {
      split.first.push_back(entry);
    }
  }
  return split;
}

// With a token, the script reads it from the session's first line of input before anything else.
std::string RemoteScript(const std::vector<std::string>& program,
                         const std::vector<std::string>& env, bool token_on_stdin,
                         const RemoteSettings& remote) {
  std::vector<std::string> exports;
  for (const std::string& entry : env) {
    const size_t eq = entry.find('=');
    exports.push_back(entry.substr(0, eq + 1) + ShellQuote(entry.substr(eq + 1)));
  }
  std::vector<std::string> words;
  for (const std::string& arg : program) words.push_back(ShellQuote(arg));
  if (!remote.remote_path.empty()) words[0] = ShellQuote(remote.remote_path);
  // fd 3 keeps the session's stdin: an asynchronous command's stdin is /dev/null in sh, so the
  // watcher reads fd 3 and kills the program at EOF, i.e. when hmcrun's ssh client goes away.
  // The first `wait` comes before any `kill -0`: a program that has already exited (and been
  // reaped by the shell) fails `kill -0`, but `wait` still returns its status; later waits only
  // follow one that a trapped signal interrupted.
  return absl::StrCat(
      remote.working_dir.empty()
          ? ""
          : absl::StrCat("cd ", ShellQuote(remote.working_dir), " 2>/dev/null; "),
      exports.empty() ? "" : absl::StrCat("export ", absl::StrJoin(exports, " "), "; "),
      "exec 3<&0; ",
      token_on_stdin
          ? absl::StrCat("IFS= read -r ", kTokenVariable, " <&3; export ", kTokenVariable, "; ")
          : "",
      absl::StrJoin(words, " "), " 3<&- </dev/null & child=$!; ",
      "trap 'kill -TERM $child 2>/dev/null' TERM INT HUP; ",
      "(read -r _ <&3; kill -TERM $child 2>/dev/null) >/dev/null 2>&1 & watcher=$!; ",
      "exec 3<&-; wait $child; status=$?; ",
      "while kill -0 $child 2>/dev/null; do wait $child; status=$?; done; ",
      "kill $watcher 2>/dev/null; exit $status");
}

}  // namespace

bool IsVariableName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

RankCommand BuildRankCommand(const InventoryHost& host, const std::vector<std::string>& program,
                             const std::vector<std::string>& env, const RemoteSettings& remote) {
  RankCommand command;
  switch (host.connection) {
    case Connection::kLocal:
      command.argv = program;
      command.env = env;
      break;
    case Connection::kNetns:
      command.argv = {"ip", "netns", "exec", host.netns};
      command.argv.insert(command.argv.end(), program.begin(), program.end());
      command.env = env;
      break;
    case Connection::kSsh: {
      command.argv = {"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30"};
      if (host.port != 0) command.argv.insert(command.argv.end(), {"-p", absl::StrCat(host.port)});
      if (!host.user.empty()) command.argv.insert(command.argv.end(), {"-l", host.user});
      if (auto key = host.vars.find("ansible_ssh_private_key_file"); key != host.vars.end()) {
        command.argv.insert(command.argv.end(), {"-i", key->second});
      }
      if (auto args = host.vars.find("ansible_ssh_common_args"); args != host.vars.end()) {
        // Shell words, as Ansible splits them (a quoted ProxyCommand stays one argument); the
        // inventory parser refused any that do not split.
        absl::StatusOr<std::vector<std::string>> words = SplitShellWords(args->second);
        if (words.ok()) command.argv.insert(command.argv.end(), words->begin(), words->end());
      }
      command.argv.push_back("--");  // Whatever the address is, ssh takes it as the host.
      command.argv.push_back(host.address);
      const auto [exported, token] = SplitToken(env);
      command.argv.push_back(RemoteScript(program, exported, !token.empty(), remote));
      command.stdin_pipe = true;
      if (!token.empty()) command.stdin_text = token + "\n";
      break;
    }
  }
  return command;
}

}  // namespace hmc
