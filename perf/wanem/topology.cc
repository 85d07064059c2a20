#include "perf/wanem/topology.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hmc::wanem {
namespace {

// Splits "12.5Mbit" into 12.5 and "Mbit".
absl::StatusOr<std::pair<double, std::string>> NumberAndUnit(absl::string_view text) {
  size_t end = 0;
  while (end < text.size() &&
         (absl::ascii_isdigit(text[end]) || text[end] == '.' || text[end] == '-')) {
    ++end;
  }
  double value;
  if (end == 0 || !absl::SimpleAtod(text.substr(0, end), &value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("'%s' is not a number with a unit", text));
  }
  return std::make_pair(value, std::string(text.substr(end)));
}

absl::Status LineError(absl::string_view origin, int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s:%d: %s", origin, line, what));
}

}  // namespace

absl::StatusOr<double> ParseRate(absl::string_view text) {
  auto parsed = NumberAndUnit(text);
  if (!parsed.ok()) return parsed.status();
  const auto& [value, unit] = *parsed;
  if (unit == "bit") return value;
  if (unit == "Kbit") return value * 1e3;
  if (unit == "Mbit") return value * 1e6;
  if (unit == "Gbit") return value * 1e9;
  return absl::InvalidArgumentError(
      absl::StrFormat("rate '%s': the unit must be bit, Kbit, Mbit or Gbit", text));
}

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  auto parsed = NumberAndUnit(text);
  if (!parsed.ok()) return parsed.status();
  const auto& [value, unit] = *parsed;
  if (unit == "B") return static_cast<uint64_t>(value);
  if (unit == "KiB") return static_cast<uint64_t>(value * 1024);
  if (unit == "MiB") return static_cast<uint64_t>(value * 1024 * 1024);
  return absl::InvalidArgumentError(
      absl::StrFormat("size '%s': the unit must be B, KiB or MiB", text));
}

absl::StatusOr<absl::Duration> ParseTime(absl::string_view text) {
  auto parsed = NumberAndUnit(text);
  if (!parsed.ok()) return parsed.status();
  const auto& [value, unit] = *parsed;
  if (unit == "us") return absl::Microseconds(value);
  if (unit == "ms") return absl::Microseconds(value * 1e3);
  if (unit == "s") return absl::Microseconds(value * 1e6);
  return absl::InvalidArgumentError(
      absl::StrFormat("time '%s': the unit must be us, ms or s", text));
}

const Region* Topology::FindRegion(absl::string_view name) const {
  for (const Region& r : regions) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

const Host* Topology::FindHost(absl::string_view name) const {
  for (const Host& h : hosts) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

absl::StatusOr<PathSpec> Topology::PathBetween(const Host& from, const Host& to) const {
  auto it = paths.find({from.region, to.region});
  if (it == paths.end()) {
    return absl::NotFoundError(
        absl::StrFormat("no path from region %s (host %s) to region %s "
                        "(host %s)",
                        from.region, from.name, to.region, to.name));
  }
  PathSpec path = it->second;
  path.capacity_bps *= scale;
  path.flow_bps *= scale;
  path.police = path.police || police;
  return path;
}

double Topology::NicBps(const Host& host) const {
  double bps = host.nic_bps;
  if (bps == 0) {
    if (const Region* r = FindRegion(host.region)) bps = r->nic_bps;
  }
  return bps * scale;
}

namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot read topology %s", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Includes nest at most this deep (a file that includes itself stops here).
constexpr int kMaxIncludeDepth = 4;

// Adds the statements of `text` to `topology`. `include_depth` < 0: includes are refused.
absl::Status ParseInto(Topology& topology, absl::string_view text, absl::string_view origin,
                       int include_depth) {
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::string_view line = raw.substr(0, raw.find('#'));
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    auto error = [&](absl::string_view what) { return LineError(origin, line_number, what); };
    // key=value attributes after the positional words.
    std::map<std::string, std::string> attributes;
    std::vector<absl::string_view> positional;
    bool oneway = false, police = false;
    for (size_t i = 1; i < words.size(); ++i) {
      const size_t eq = words[i].find('=');
      if (eq != absl::string_view::npos) {
        attributes[std::string(words[i].substr(0, eq))] = std::string(words[i].substr(eq + 1));
      } else if (words[i] == "oneway") {
        oneway = true;
      } else if (words[i] == "police" && words[0] == "path") {
        police = true;
      } else {
        positional.push_back(words[i]);
      }
    }
    auto take = [&](const char* key) -> std::optional<std::string> {
      auto it = attributes.find(key);
      if (it == attributes.end()) return std::nullopt;
      std::string value = it->second;
      attributes.erase(it);
      return value;
    };
    const absl::string_view keyword = words[0];
    if (keyword == "scale") {
      if (positional.size() != 1 || !absl::SimpleAtod(positional[0], &topology.scale) ||
          topology.scale <= 0) {
        return error("expected 'scale FACTOR' with a factor above 0");
      }
    } else if (keyword == "police") {
      if (!positional.empty()) return error("expected 'police' alone");
      topology.police = true;
    } else if (keyword == "include") {
      if (positional.size() != 1) return error("expected 'include FILE'");
      if (include_depth < 0) return error("include is only allowed in files");
      if (include_depth >= kMaxIncludeDepth) {
        return error(absl::StrFormat("includes nest deeper than %d", kMaxIncludeDepth));
      }
      const std::string path =
          (std::filesystem::path(std::string(origin)).parent_path() / std::string(positional[0]))
              .string();
      absl::StatusOr<std::string> included = ReadText(path);
      if (!included.ok()) return error(included.status().message());
      if (absl::Status s = ParseInto(topology, *included, path, include_depth + 1); !s.ok()) {
        return s;
      }
    } else if (keyword == "queue") {
      if (positional.size() != 1) return error("expected 'queue SIZE'");
      auto size = ParseSize(positional[0]);
      if (!size.ok()) return error(size.status().message());
      topology.queue_bytes = *size;
    } else if (keyword == "region" || keyword == "host") {
      if (positional.size() != 1) return error(absl::StrFormat("expected '%s NAME ...'", keyword));
      double nic = 0;
      if (auto value = take("nic")) {
        auto rate = ParseRate(*value);
        if (!rate.ok()) return error(rate.status().message());
        nic = *rate;
      }
      if (keyword == "region") {
        if (topology.FindRegion(positional[0]) != nullptr) {
          return error(absl::StrFormat("region %s is defined twice", positional[0]));
        }
        topology.regions.push_back(
            Region{std::string(positional[0]), take("cloud").value_or(""), nic});
      } else {
        std::optional<std::string> region = take("region");
        if (!region.has_value() || topology.FindRegion(*region) == nullptr) {
          return error(absl::StrFormat("host %s needs region=NAME of a region defined above",
                                       positional[0]));
        }
        if (topology.FindHost(positional[0]) != nullptr) {
          return error(absl::StrFormat("host %s is defined twice", positional[0]));
        }
        topology.hosts.push_back(Host{std::string(positional[0]), *region, nic});
      }
    } else if (keyword == "path") {
      if (positional.size() != 2) return error("expected 'path FROM TO rtt=... capacity=...'");
      for (absl::string_view region : positional) {
        if (topology.FindRegion(region) == nullptr) {
          return error(absl::StrFormat("path names region %s, which is not defined above", region));
        }
      }
      PathSpec path;
      std::optional<std::string> rtt = take("rtt"), capacity = take("capacity");
      if (!rtt.has_value() || !capacity.has_value()) {
        return error("a path needs rtt= and capacity=");
      }
      auto rtt_value = ParseTime(*rtt);
      auto capacity_value = ParseRate(*capacity);
      if (!rtt_value.ok()) return error(rtt_value.status().message());
      if (!capacity_value.ok()) return error(capacity_value.status().message());
      path.rtt = *rtt_value;
      path.police = police;
      path.capacity_bps = *capacity_value;
      path.flow_bps = path.capacity_bps;
      if (auto flow = take("flow")) {
        auto value = ParseRate(*flow);
        if (!value.ok()) return error(value.status().message());
        path.flow_bps = *value;
      }
      if (auto jitter = take("jitter")) {
        auto value = ParseTime(*jitter);
        if (!value.ok()) return error(value.status().message());
        path.jitter = *value;
      }
      if (auto loss = take("loss")) {
        absl::string_view number = *loss;
        const bool percent = absl::ConsumeSuffix(&number, "%");
        double value;
        if (!absl::SimpleAtod(number, &value) || value < 0 || value > (percent ? 100 : 1)) {
          return error(
              absl::StrFormat("loss '%s' is not a fraction in [0, 1] or a percentage", *loss));
        }
        path.loss = percent ? value / 100 : value;
      }
      if (path.capacity_bps <= 0 || path.flow_bps <= 0) return error("rates must be above 0");
      const std::pair<std::string, std::string> key{std::string(positional[0]),
                                                    std::string(positional[1])};
      topology.paths[key] = path;
      if (!oneway) topology.paths[{key.second, key.first}] = path;
    } else {
      return error(absl::StrFormat(
          "unknown statement '%s' (expected scale, queue, police, include, region, host or path)",
          keyword));
    }
    if (!attributes.empty()) {
      return error(absl::StrFormat("unknown attribute '%s'", attributes.begin()->first));
    }
  }
  if (include_depth <= 0 && topology.hosts.empty()) {
    return LineError(origin, line_number, "the topology has no hosts");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Topology> ParseTopology(absl::string_view text, absl::string_view origin) {
  Topology topology;
  if (absl::Status s = ParseInto(topology, text, origin, /*include_depth=*/-1); !s.ok()) return s;
  return topology;
}

absl::StatusOr<Topology> LoadTopology(const std::string& path) {
  absl::StatusOr<std::string> text = ReadText(path);
  if (!text.ok()) return text.status();
  Topology topology;
  if (absl::Status s = ParseInto(topology, *text, path, /*include_depth=*/0); !s.ok()) return s;
  return topology;
}

}  // namespace hmc::wanem
