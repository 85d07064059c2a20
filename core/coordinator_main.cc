// hmc-coordinator: runs the coordinator alone, for groups that hmcrun does not launch.
//   HMC_TOKEN=secret hmc-coordinator --bind=0.0.0.0:29400 --world_size=8
// It prints its address, serves until every rank has joined and left (or failed), and exits 0;
// SIGINT or SIGTERM stop it early with status 1.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/clock.h"
#include "core/coordinator.h"

ABSL_FLAG(std::string, bind, "127.0.0.1:0", "Address to listen on (host:port, [v6]:port).");
ABSL_FLAG(int, world_size, 0, "Number of ranks in the world (required): the first epoch's.");
ABSL_FLAG(int, max_ranks, 0,
          "Members a running group may grow to as ranks join it; 0: world_size (a joiner takes a "
          "lost rank's place).");
ABSL_FLAG(std::string, world_id, "hmc", "Name of the world; joins naming another are refused.");
ABSL_FLAG(std::string, address_file, "",
          "Once listening, write the address here (written whole: a reader never sees a part); "
          "what hmcrun reads to learn the port of a coordinator it started on port 0.");
ABSL_FLAG(bool, insecure, false,
          "Run without HMC_TOKEN: anyone who reaches --bind may join. Without this flag an empty "
          "token is refused.");
ABSL_FLAG(std::string, tls, "auto",
          "TLS 1.3 on rank connections: auto (required from ranks whose address or this one's is "
          "neither private nor loopback), on (required from every rank) or off (only where a rank "
          "asks). Keys come from HMC_TOKEN unless --tls_cert, --tls_key and --tls_ca are given.");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain this coordinator presents.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM authorities that ranks' certificates must chain to.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::ZeroDuration(),
          "Silence after which a rank is declared failed; 0: ten round trips of its connection, at "
          "least 3 s.");

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Runs an hmc coordinator. The shared token is read from HMC_TOKEN.");
  absl::ParseCommandLine(argc, argv);
  hmc::CoordinatorConfig config;
  config.bind = absl::GetFlag(FLAGS_bind);
  config.world_size = absl::GetFlag(FLAGS_world_size);
  config.max_ranks = absl::GetFlag(FLAGS_max_ranks);
  config.world_id = absl::GetFlag(FLAGS_world_id);
  config.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  config.insecure = absl::GetFlag(FLAGS_insecure);
  if (const char* token = std::getenv("HMC_TOKEN")) config.token = token;
  // The flags mean what the ranks' options of the same names mean, read by the same code.
  hmc::CoreOptions tls_options;
  tls_options.tls = absl::GetFlag(FLAGS_tls);
  tls_options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  tls_options.tls_key = absl::GetFlag(FLAGS_tls_key);
  tls_options.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  absl::StatusOr<hmc::TlsConfig> tls = hmc::TlsConfigFrom(tls_options);
  if (!tls.ok()) {
    std::fprintf(stderr, "hmc-coordinator: --%s\n", std::string(tls.status().message()).c_str());
    return 2;
  }
  config.tls = *std::move(tls);
  if (config.world_size < 1) {
    std::fprintf(stderr, "hmc-coordinator: --world_size must be at least 1\n");
    return 2;
  }
  hmc::RaiseDescriptorLimit();  // Every rank and every half-open connection holds one.
  auto coordinator = hmc::Coordinator::Start(config);
  if (!coordinator.ok()) {
    std::fprintf(stderr, "hmc-coordinator: %s\n", coordinator.status().ToString().c_str());
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  if (const std::string path = absl::GetFlag(FLAGS_address_file); !path.empty()) {
    const std::string partial = path + ".partial";
    std::FILE* f = std::fopen(partial.c_str(), "w");
    if (f == nullptr || std::fputs((*coordinator)->address().ToString().c_str(), f) < 0 ||
        std::fclose(f) != 0 || std::rename(partial.c_str(), path.c_str()) != 0) {
      std::fprintf(stderr, "hmc-coordinator: cannot write --address_file=%s\n", path.c_str());
      return 1;
    }
  }
  std::printf("hmc-coordinator listening on %s for %d ranks of world '%s'\n",
              (*coordinator)->address().ToString().c_str(), config.world_size,
              config.world_id.c_str());
  std::fflush(stdout);
  while (!g_stop) {
    if ((*coordinator)->WaitUntilFinished(absl::Now() + absl::Milliseconds(200))) return 0;
  }
  return 1;
}
