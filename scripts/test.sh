#!/bin/sh
# Builds and runs the whole test suite three ways: Release; ASan+UBSan (clang); TSan on the
# transport, coordinator and in-process collective tests (the multi-process ones run under
# ASan+UBSan). Then each libFuzzer target, from the ASan+UBSan build, runs briefly
# (scripts/fuzz.sh; longer runs are for hand or cron).
# The libtorch integration (ddp/, the training examples) is tested in the Release build only:
# Debian's libtorch is not built with the sanitizers, so the sanitizer builds leave it out.
set -eu
cd "$(dirname "$0")/.."
jobs=$(nproc)
start=$(date +%s)
elapsed() { echo "   ($(($(date +%s) - start)) s since the start)"; }

run_suite() {  # build-dir ctest-args...
  dir=$1
  shift
  ctest --test-dir "$dir" --output-on-failure --timeout 900 -j "$jobs" "$@"
}

echo "== Release build and tests"
./scripts/build.sh
elapsed
run_suite build
elapsed

echo "== ASan+UBSan build and tests"
./scripts/asan_build.sh
elapsed
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_suite build-asan
elapsed

echo "== TSan build and tests"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHMC_SANITIZE=thread \
  -DHMC_WITH_GLOO=OFF -DHMC_WITH_TORCH=OFF > /dev/null
cmake --build build-tsan --parallel --target transport_test coordinator_test collectives_unit_test
elapsed
# UCX_MEM_EVENTS=no: UCX's memory hooks (libucm patches madvise) crash under TSan's interceptors
# when a thread exits; hmc needs no memory events (they serve UCX's RDMA registration cache).
UCX_MEM_EVENTS=no TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
  run_suite build-tsan -R 'ChannelContract|TcpTransport|ProvenLinkTransport|Coordinator|Inproc|HostReduce|HostilePeer|ForgedOffer|PointToPoint|ProtectedLink|ManInTheMiddle|LinkProtection|AverageRound|PartsOfDifferentSizes|WorkerPool|Work\.'
elapsed

echo "== fuzz targets (clang libFuzzer, the ASan+UBSan build's), briefly from their committed seeds"
./scripts/fuzz.sh 10
elapsed

echo "== all suites passed"
