#!/bin/sh
# Configures and builds the TSan build into build-tsan/: the library and the tests that
# scripts/test.sh runs under TSan (transports, coordinator, in-process collectives; the
# multi-process tests run under ASan+UBSan).
#   scripts/tsan_build.sh
set -eu
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHMC_SANITIZE=thread \
  -DHMC_WITH_GLOO=OFF -DHMC_WITH_TORCH=OFF > build-tsan-configure.log 2>&1 || {
  cat build-tsan-configure.log
  exit 1
}
cmake --build build-tsan --parallel --target transport_test coordinator_test collectives_unit_test
