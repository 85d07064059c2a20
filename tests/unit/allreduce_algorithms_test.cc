// The all-reduce registry: names and wire ids are unique and fixed, and the option's check reads
// it.
#include "collectives/allreduce_algorithms.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

namespace hmc {
namespace {

using ::testing::HasSubstr;

// Wire ids travel in every call's descriptor: renumbering one makes ranks of two builds read each
// other's algorithm wrong. New algorithms take new ids.
TEST(AllReduceAlgorithms, NamesAndWireIdsAreUniqueAndFixed) {
  const std::map<std::string, int> published = {
      {"ring", 1}, {"halving_doubling", 2}, {"hierarchical", 3}, {"butterfly", 4}, {"one_shot", 5}};
  std::set<std::string> names;
  std::set<int> ids;
  for (const AllReduceAlgorithm& a : AllReduceAlgorithms()) {
    EXPECT_TRUE(names.insert(std::string(a.name)).second) << a.name;
    EXPECT_TRUE(ids.insert(a.wire_id).second) << a.name;
    EXPECT_NE(a.wire_id, 0) << a.name;  // 0: no algorithm (a call that failed its checks).
    EXPECT_NE(a.run, nullptr) << a.name;
    EXPECT_FALSE(a.summary.empty()) << a.name;
    EXPECT_EQ(FindAllReduceAlgorithm(a.name), &a);
    EXPECT_EQ(FindAllReduceAlgorithm(a.wire_id), &a);
    if (auto it = published.find(std::string(a.name)); it != published.end()) {
      EXPECT_EQ(a.wire_id, it->second) << a.name;
    }
  }
  for (const auto& [name, id] : published) EXPECT_TRUE(names.contains(name)) << name;
  EXPECT_EQ(FindAllReduceAlgorithm("fast"), nullptr);
  EXPECT_EQ(FindAllReduceAlgorithm(uint8_t{0}), nullptr);
}

TEST(AllReduceAlgorithms, TheOptionTakesAutoOrANameAndListsThemOtherwise) {
  EXPECT_TRUE(CheckAllReduceAlgorithmOption("auto").ok());
  EXPECT_TRUE(CheckAllReduceAlgorithmOption("").ok());
  for (const AllReduceAlgorithm& a : AllReduceAlgorithms()) {
    EXPECT_TRUE(CheckAllReduceAlgorithmOption(a.name).ok()) << a.name;
  }
  const absl::Status s = CheckAllReduceAlgorithmOption("fast");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("algo=fast: must be auto or one of ring, halving_doubling, "
                                     "hierarchical, butterfly, one_shot"));
  EXPECT_THAT(DescribeAllReduceAlgorithms(), HasSubstr("  butterfly "));
}

}  // namespace
}  // namespace hmc
