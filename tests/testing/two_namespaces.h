#ifndef HMC_TESTS_TESTING_TWO_NAMESPACES_H_
#define HMC_TESTS_TESTING_TWO_NAMESPACES_H_

// Two emulated hosts: network namespaces joined by a veth pair, created by the fixture and deleted
// after the test (root; the test is skipped without it). Host a has SUBNET.1, host b SUBNET.2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testing/command.h"

namespace hmc::testing_util {

// `subnet`: the first three octets, e.g. "10.231.77"; `tag` keeps fixtures of different tests
// that run at once apart.
class TwoNamespaces : public testing::Test {
 protected:
  TwoNamespaces(std::string subnet, std::string tag)
      : subnet_(std::move(subnet)), tag_(std::move(tag)) {}

  static int Run(const std::vector<std::string>& argv) {
    return RunCommand(argv, absl::Seconds(30)).code;
  }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "creating network namespaces needs root";
    const std::string id = absl::StrCat(tag_, getpid() % 100000);
    a_ = "hmc-" + id + "a";
    b_ = "hmc-" + id + "b";
    va_ = "h" + id + "a";
    vb_ = "h" + id + "b";
    if (Run({"ip", "netns", "add", a_}) != 0) GTEST_SKIP() << "ip netns is not available";
    created_ = true;
    ASSERT_EQ(Run({"ip", "netns", "add", b_}), 0);
    ASSERT_EQ(Run({"ip", "link", "add", va_, "netns", a_, "type", "veth", "peer", "name", vb_,
                   "netns", b_}),
              0);
    for (const auto& [ns, dev, address] :
         {std::tuple{a_, va_, address_a() + "/24"}, std::tuple{b_, vb_, address_b() + "/24"}}) {
      ASSERT_EQ(Run({"ip", "-n", ns, "addr", "add", address, "dev", dev}), 0);
      ASSERT_EQ(Run({"ip", "-n", ns, "link", "set", dev, "up"}), 0);
      ASSERT_EQ(Run({"ip", "-n", ns, "link", "set", "lo", "up"}), 0);
    }
  }

  void TearDown() override {
    if (!created_) return;
    Run({"ip", "netns", "del", a_});  // Deleting a namespace removes its end of the veth pair.
    Run({"ip", "netns", "del", b_});
  }

  std::string address_a() const { return subnet_ + ".1"; }
  std::string address_b() const { return subnet_ + ".2"; }

  const std::string subnet_, tag_;
  std::string a_, b_;    // The namespaces.
  std::string va_, vb_;  // Their ends of the veth pair.
  bool created_ = false;
};

}  // namespace hmc::testing_util

#endif  // HMC_TESTS_TESTING_TWO_NAMESPACES_H_
