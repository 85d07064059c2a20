#ifndef HMC_TESTS_TESTING_COMMAND_H_
#define HMC_TESTS_TESTING_COMMAND_H_

// Helpers for tests that run programs: read what they wrote (files, JSON lines), run one to
// completion.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "launcher/process.h"

namespace hmc::testing_util {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A file's non-empty lines (a JSON-lines file: one record each).
inline std::vector<std::string> Lines(const std::string& path) {
  return absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty());
}

// What a program printed on its own, without hmc's log lines ("<time> hmc[component] ..."), which
// come and go with what the library has to say (a rank logs when it measures its links).
inline std::string ReadFileWithoutLogLines(const std::string& path) {
  std::string kept;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    if (absl::StrContains(line, " hmc[")) continue;
    absl::StrAppend(&kept, line, "\n");
  }
  return kept;
}

// The number after "key": (with or without a space) in a JSON line; -1 where the key is absent.
inline double JsonNumber(absl::string_view json, absl::string_view key) {
  const std::string needle = absl::StrCat("\"", key, "\":");
  const size_t at = json.find(needle);
  if (at == absl::string_view::npos) return -1;
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(json.substr(at + needle.size()));
  double value = -1;
  EXPECT_TRUE(absl::SimpleAtod(rest.substr(0, rest.find_first_of(",}")), &value)) << json;
  return value;
}

// A path in the test's temporary directory, unique to this process.
inline std::string TempPath(absl::string_view name) {
  return absl::StrCat(testing::TempDir(), "/", getpid(), "_", name);
}

struct Outcome {
  int code = -1;       // -1: did not start or did not finish in time (then it was killed).
  std::string output;  // stdout and stderr.
};

// Runs `argv` until it exits or `limit` passes.
inline Outcome RunCommand(const std::vector<std::string>& argv,
                          absl::Duration limit = absl::Minutes(5)) {
  const std::string output = TempPath("command.out");
  absl::StatusOr<Process> p = Process::Spawn(argv, {}, {.output_path = output});
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  absl::StatusOr<int> code = p->Wait(absl::Now() + limit);
  EXPECT_TRUE(code.ok()) << argv[0] << " did not finish within " << limit;
  return {code.ok() ? *code : -1, ReadFile(output)};
}

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_COMMAND_H_
