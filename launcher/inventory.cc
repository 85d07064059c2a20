#include "launcher/inventory.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hmc {
namespace {

// A variable's value and the "file:line" that set it, for errors found after resolution.
struct Value {
  std::string text;
  std::string where;
};
using Vars = std::map<std::string, Value>;

struct Group {
  Vars vars;
  std::vector<std::string> children;
  std::string where;  // First mention.
};

struct HostRecord {
  std::string where;
  std::vector<std::string> groups;  // Groups that list the host directly, in order.
  Vars vars;
};

absl::Status LineError(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

absl::StatusOr<std::vector<std::string>> Tokens(absl::string_view line, const std::string& where) {
  absl::StatusOr<std::vector<std::string>> words = SplitShellWords(line);
  if (!words.ok()) return LineError(where, std::string(words.status().message()));
  return words;
}

// Drops a comment: a line starting with # or ;, or " #" or " ;" after content.
absl::string_view StripComment(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (absl::StartsWith(line, "#") || absl::StartsWith(line, ";")) return "";
  for (absl::string_view marker : {" #", " ;"}) {
    const size_t at = line.find(marker);
    if (at != absl::string_view::npos) line = line.substr(0, at);
  }
  return absl::StripAsciiWhitespace(line);
}

absl::Status ParseAssignment(absl::string_view token, const std::string& where, Vars& vars) {
  const size_t eq = token.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return LineError(where, absl::StrFormat("expected 'key=value', got '%s'", token));
  }
  vars[std::string(token.substr(0, eq))] = {std::string(token.substr(eq + 1)), where};
  return absl::OkStatus();
}

bool IsLoopback(absl::string_view address) {
  return address == "localhost" || address == "::1" || absl::StartsWith(address, "127.");
}

absl::StatusOr<int> IntVar(const Vars& vars, const std::string& name, int fallback, int min,
                           int max) {
  auto it = vars.find(name);
  if (it == vars.end()) return fallback;
  int value;
  if (!absl::SimpleAtoi(it->second.text, &value) || value < min || value > max) {
    return LineError(it->second.where, absl::StrFormat("%s=%s: expected an integer in %d..%d", name,
                                                       it->second.text, min, max));
  }
  return value;
}

std::string StringVar(const Vars& vars, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto it = vars.find(name);
    if (it != vars.end()) return it->second.text;
  }
  return "";
}

class Parser {
 public:
  explicit Parser(absl::string_view source) : source_(source) {}

  absl::Status Parse(absl::string_view text) {
    std::string section_group = "ungrouped";
    std::string section_kind;  // Empty: hosts.
    int line_number = 0;
    for (absl::string_view raw : absl::StrSplit(text, '\n')) {
      ++line_number;
      const std::string where = absl::StrCat(source_, ":", line_number);
      absl::string_view line = StripComment(raw);
      if (line.empty()) continue;
      if (absl::ConsumePrefix(&line, "[")) {
        if (!absl::ConsumeSuffix(&line, "]")) {
          return LineError(where, "expected ']' to close the section header");
        }
        const std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 1));
        section_group = parts[0];
        section_kind = parts.size() > 1 ? parts[1] : "";
        if (section_group.empty() || absl::StrContains(section_group, ' ')) {
          return LineError(where, absl::StrFormat("expected a group name, got '[%s]'", line));
        }
        if (parts.size() > 1 && section_kind != "vars" && section_kind != "children") {
          return LineError(where,
                           absl::StrFormat("expected [%s], [%s:vars] or [%s:children], "
                                           "got '[%s]'",
                                           section_group, section_group, section_group, line));
        }
        Group& group = groups_[section_group];
        if (group.where.empty()) group.where = where;
        continue;
      }
      absl::StatusOr<std::vector<std::string>> tokens = Tokens(line, where);
      if (!tokens.ok()) return tokens.status();
      if (section_kind == "vars") {
        // "key=value" or "key = value".
        const std::string joined = absl::StrJoin(*tokens, "");
        if (absl::Status s = ParseAssignment(joined, where, groups_[section_group].vars); !s.ok()) {
          return s;
        }
      } else if (section_kind == "children") {
        if (tokens->size() != 1) {
          return LineError(where, absl::StrFormat("expected one group name, got '%s'", line));
        }
        groups_[section_group].children.push_back({(*tokens)[0]});
        child_where_[(*tokens)[0]] = where;
      } else if (absl::Status s = AddHost(*tokens, section_group, where); !s.ok()) {
        return s;
      }
    }
    for (const auto& [name, group] : groups_) {
      for (const std::string& child : group.children) {
        if (!groups_.contains(child)) {
          return LineError(
              child_where_[child],
              absl::StrFormat("[%s:children] names '%s', which is not a group", name, child));
        }
      }
    }
    if (order_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(source_, ": expected at least one host"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Inventory> Resolve() const {
    Inventory inventory;
    for (const std::string& name : order_) {
      const HostRecord& record = hosts_.at(name);
      Vars vars;
      if (auto all = groups_.find("all"); all != groups_.end()) Merge(all->second.vars, vars);
      for (const std::string& group : record.groups) MergeGroup(group, vars, 0);
      Merge(record.vars, vars);
      absl::StatusOr<InventoryHost> host = MakeHost(name, record, vars);
      if (!host.ok()) return host.status();
      inventory.hosts.push_back(std::move(*host));
    }
    return inventory;
  }

 private:
  absl::Status AddHost(const std::vector<std::string>& tokens, const std::string& group,
                       const std::string& where) {
    const std::string& name = tokens[0];
    if (absl::StrContains(name, '=')) {
      return LineError(where, absl::StrFormat("expected a host name first, got '%s'", name));
    }
    auto [it, inserted] = hosts_.try_emplace(name);
    HostRecord& record = it->second;
    if (inserted) {
      record.where = where;
      order_.push_back(name);
    }
    if (group != "ungrouped") record.groups.push_back(group);
    for (size_t i = 1; i < tokens.size(); ++i) {
      if (absl::Status s = ParseAssignment(tokens[i], where, record.vars); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  static void Merge(const Vars& from, Vars& into) {
    for (const auto& [key, value] : from) into[key] = value;
  }

  // Parents first, so a child group's variables win; bounded against cycles.
  void MergeGroup(const std::string& group, Vars& vars, int depth) const {
    if (depth > 16) return;
    for (const auto& [name, parent] : groups_) {
      for (const std::string& child : parent.children) {
        if (child == group) MergeGroup(name, vars, depth + 1);
      }
    }
    if (auto it = groups_.find(group); it != groups_.end()) Merge(it->second.vars, vars);
  }

  absl::StatusOr<InventoryHost> MakeHost(const std::string& name, const HostRecord& record,
                                         const Vars& vars) const {
    InventoryHost host;
    host.name = name;
    host.where = record.where;
    host.address = StringVar(vars, {"ansible_host", "ansible_ssh_host"});
    if (host.address.empty()) host.address = name;
    host.user = StringVar(vars, {"ansible_user", "ansible_ssh_user"});
    host.netns = StringVar(vars, {"netns"});
    host.zone = StringVar(vars, {"zone"});
    if (host.zone.empty()) host.zone = record.groups.empty() ? "default" : record.groups[0];
    const char* port_name = vars.contains("ansible_ssh_port") ? "ansible_ssh_port" : "ansible_port";
    absl::StatusOr<int> port = IntVar(vars, port_name, 0, 1, 65535);
    absl::StatusOr<int> slots = IntVar(vars, "slots", 1, 1, 4096);
    absl::StatusOr<int> gpus = IntVar(vars, "gpus", 0, 0, 4096);
    for (const absl::StatusOr<int>* v : {&port, &slots, &gpus}) {
      if (!v->ok()) return v->status();
    }
    host.port = *port;
    host.slots = *slots;
    host.gpus = *gpus;
    auto connection = vars.find("ansible_connection");
    if (connection != vars.end()) {
      const std::string& c = connection->second.text;
      if (c == "local") {
        host.connection = Connection::kLocal;
      } else if (c == "ssh") {
        host.connection = Connection::kSsh;
      } else if (c == "netns") {
        host.connection = Connection::kNetns;
      } else {
        return LineError(connection->second.where,
                         absl::StrFormat("ansible_connection=%s: expected local, ssh or netns", c));
      }
    } else if (!host.netns.empty()) {
      host.connection = Connection::kNetns;
    } else {
      host.connection = IsLoopback(host.address) ? Connection::kLocal : Connection::kSsh;
    }
    if (host.connection == Connection::kNetns && host.netns.empty()) {
      return LineError(record.where, absl::StrFormat("host %s: ansible_connection=netns needs "
                                                     "netns=NAME",
                                                     name));
    }
    if (host.address.empty() || host.address[0] == '-') {
      return LineError(record.where, absl::StrFormat("host %s: address '%s' is not a host name",
                                                     name, host.address));
    }
    if (auto args = vars.find("ansible_ssh_common_args"); args != vars.end()) {
      if (absl::StatusOr<std::vector<std::string>> words = SplitShellWords(args->second.text);
          !words.ok()) {
        return LineError(args->second.where, absl::StrFormat("host %s: ansible_ssh_common_args: %s",
                                                             name, words.status().message()));
      }
    }
    for (const auto& [key, value] : vars) host.vars[key] = value.text;
    return host;
  }

  std::string source_;
  std::map<std::string, Group> groups_;
  std::map<std::string, std::string> child_where_;
  std::map<std::string, HostRecord> hosts_;
  std::vector<std::string> order_;
};

}  // namespace

int Inventory::slots() const {
  int total = 0;
  for (const InventoryHost& h : hosts) total += h.slots;
  return total;
}

absl::StatusOr<std::vector<std::string>> SplitShellWords(absl::string_view text) {
  std::vector<std::string> words;
  std::string current;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote == '\'') {
      if (c == '\'') {
        quote = 0;
      } else {
        current += c;
      }
    } else if (c == '\\' && (quote == 0 || (i + 1 < text.size() &&
                                            absl::string_view("\"\\$`").find(text[i + 1]) !=
                                                absl::string_view::npos))) {
      if (++i == text.size()) return absl::InvalidArgumentError("nothing after a backslash");
      current += text[i];
      in_word = true;
    } else if (quote == '"') {
      if (c == '"') {
        quote = 0;
      } else {
        current += c;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(current));
      current.clear();
      in_word = false;
    } else {
      current += c;
      in_word = true;
    }
  }
  if (quote != 0)
    return absl::InvalidArgumentError(absl::StrFormat("expected a closing %c", quote));
  if (in_word) words.push_back(std::move(current));
  return words;
}

absl::StatusOr<Inventory> ParseInventory(absl::string_view text, absl::string_view source) {
  Parser parser(source);
  if (absl::Status s = parser.Parse(text); !s.ok()) return s;
  return parser.Resolve();
}

absl::StatusOr<Inventory> LoadInventory(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot read inventory %s", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseInventory(text.str(), path);
}

}  // namespace hmc
