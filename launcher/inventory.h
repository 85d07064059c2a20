#ifndef HMC_LAUNCHER_INVENTORY_H_
#define HMC_LAUNCHER_INVENTORY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hmc {

// How hmcrun reaches a host.
enum class Connection { kLocal, kSsh, kNetns };

// One host of an inventory with its variables resolved (host > group > parent group > all).
struct InventoryHost {
  std::string name;     // As written in the inventory.
  std::string address;  // ansible_host, else the name.
  std::string user;     // ansible_user; empty: ssh's default.
  int port = 0;         // ansible_port; 0: ssh's default.
  std::string zone;     // zone=, else the group that lists the host, else "default".
  int slots = 1;        // Ranks started on the host.
  int gpus = 0;
  std::string netns;  // netns=: run inside this network namespace.
  Connection connection = Connection::kLocal;
  std::map<std::string, std::string> vars;  // Every variable, resolved.
  std::string where;                        // "file:line" of the host's first mention.
};

struct Inventory {
  std::vector<InventoryHost> hosts;  // In order of first mention.
  int slots() const;
};

// Parses an Ansible INI inventory (`[group]` sections of `host key=value…` lines,
// `[group:vars]`, `[group:children]`, `[all:vars]`, `#`/`;` comments) or an MPI-style hostfile
// (`host slots=N`). A group names a zone unless a host sets `zone=`. The connection is
// `ansible_connection` (local, ssh or netns) when given, else netns when `netns=` is set, else
// local for localhost/127.x/::1 and ssh for anything else. A malformed line is refused as
// "SOURCE:LINE: what was expected".
absl::StatusOr<Inventory> ParseInventory(absl::string_view text, absl::string_view source);

// Splits text into words as a POSIX shell (and Ansible's shlex) does: blanks separate words,
// 'single' quotes keep everything, "double" quotes keep everything but \" \\ \$ \`, and a backslash
// outside quotes keeps the next character. Used for inventory lines and ansible_ssh_common_args.
absl::StatusOr<std::vector<std::string>> SplitShellWords(absl::string_view text);
absl::StatusOr<Inventory> LoadInventory(const std::string& path);

// The inventory hmcrun uses without -hosts: examples/inventory.local, built in.
absl::string_view DefaultInventoryText();

}  // namespace hmc

#endif  // HMC_LAUNCHER_INVENTORY_H_
