#include "collectives/options.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "core/tls.h"
#include "core/transport_choice.h"

namespace hmc {
namespace {

TEST(Options, ReadsEnvironmentAndFlagsWin) {
  setenv("HMC_STREAMS", "8", 1);
  setenv("HMC_TIMEOUT", "30s", 1);
  setenv("HMC_ZONE", "eu-west", 1);
  auto options = Options::FromEnvironment();
  unsetenv("HMC_STREAMS");
  unsetenv("HMC_TIMEOUT");
  unsetenv("HMC_ZONE");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->streams, 8);
  EXPECT_EQ(options->timeout, absl::Seconds(30));
  EXPECT_EQ(options->zone, "eu-west");
  auto rest = options->ApplyFlags({"--streams=2", "-n", "4", "--check_args=false", "--other=1"});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(options->streams, 2);
  EXPECT_FALSE(options->check_args);
  EXPECT_EQ(*rest, (std::vector<std::string>{"-n", "4", "--other=1"}));
}

TEST(Options, RejectsBadValuesWithTheVariableName) {
  setenv("HMC_STREAMS", "many", 1);
  auto options = Options::FromEnvironment();
  unsetenv("HMC_STREAMS");
  ASSERT_FALSE(options.ok());
  EXPECT_TRUE(absl::StrContains(options.status().message(), "HMC_STREAMS"));
  Options o;
  EXPECT_FALSE(o.Set("streams", "-1").ok());
  EXPECT_FALSE(o.Set("timeout", "10 parsecs").ok());
  EXPECT_FALSE(o.Set("no_such_option", "1").ok());
  EXPECT_EQ(o.streams, 0);  // A refused value leaves the option as it was.
}

TEST(Options, TransportNamesAKindPerLinkClass) {
  auto every = ParseTransportChoice("ucx");
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_EQ(every->intra, TransportKind::kUcx);
  EXPECT_EQ(every->inter, TransportKind::kUcx);
  auto split = ParseTransportChoice("intra=ucx,inter=tcp");
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->intra, TransportKind::kUcx);
  EXPECT_EQ(split->inter, TransportKind::kTcp);
  auto one = ParseTransportChoice("inter=ucx");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->intra, TransportKind::kTcp);
  EXPECT_EQ(one->inter, TransportKind::kUcx);
  EXPECT_TRUE(ParseTransportChoice("auto")->automatic);
  Options options;
  EXPECT_EQ(ParseTransportChoice("intra=ofi")->intra, TransportKind::kOfi);
  for (const char* bad : {"udp", "intra=udp", "zone=ucx", "intra"}) {
    const absl::Status s = options.Set("transport", bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "transport=")) << s;
  }
}

TEST(Options, TlsSettingsReachTheTlsConfig) {
  Options o;
  auto defaults = TlsConfigFrom(o);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->mode, TlsMode::kAuto);
  EXPECT_TRUE(defaults->kernel);
  ASSERT_TRUE(o.ApplyFlags({"--tls=on", "--tls_kernel=0", "--tls_ca=/ca.pem"}).ok());
  auto config = TlsConfigFrom(o);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->mode, TlsMode::kOn);
  EXPECT_FALSE(config->kernel);
  EXPECT_EQ(config->ca_file, "/ca.pem");
}

TEST(Options, EnvironmentRoundTripsAndEveryOptionIsDocumented) {
  Options o;
  ASSERT_TRUE(o.Set("heartbeat_timeout", "3s").ok());
  ASSERT_TRUE(o.Set("world_id", "exp-7").ok());
  for (const std::string& entry : o.ToEnvironment()) {
    const size_t eq = entry.find('=');
    setenv(entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str(), 1);
  }
  auto back = Options::FromEnvironment();
  for (const std::string& entry : o.ToEnvironment())
    unsetenv(entry.substr(0, entry.find('=')).c_str());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->heartbeat_timeout, absl::Seconds(3));
  EXPECT_EQ(back->world_id, "exp-7");
  const std::string table = Options::DescribeAll();
  for (const std::string& entry : o.ToEnvironment()) {
    EXPECT_TRUE(absl::StrContains(table, entry.substr(0, entry.find('=')))) << entry;
  }
}

}  // namespace
}  // namespace hmc
