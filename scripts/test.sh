#!/bin/sh
# Builds and runs the whole test suite three ways: Release; ASan+UBSan (clang); TSan on the
# transport, coordinator and in-process collective tests (the multi-process ones run under
# ASan+UBSan). Then each libFuzzer target, from the ASan+UBSan build, runs briefly
# (scripts/fuzz.sh; longer runs are for hand or cron).
# The next build runs beside each stage's tests at the lowest priority (nice 19): the tests leave
# about a fifth of the CPUs idle while they wait on peers and timeouts, and the build takes that
# time without taking the tests' share. Its output goes to a log, shown when it fails. The WAN
# emulator's tests (label wan) run after it, alone: the emulator forwards every packet in user
# space, and a link probe beside a build has timed out its TCP links.
# The libtorch integration (ddp/, the training examples) is tested in the Release build only:
# Debian's libtorch is not built with the sanitizers, so the sanitizer builds leave it out.
set -eu
cd "$(dirname "$0")/.."
jobs=$(nproc)
start=$(date +%s)
times_file=$(mktemp)
# Wall time and the CPU time of every finished command (user + system, compilers and tests alike):
# machines differ in speed between runs, and CPU seconds let runs on different ones be compared.
elapsed() {
  times > "$times_file"  # In this shell: a command substitution's subshell has other children.
  cpu=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, "m"); s += t[1] * 60 + t[2] } }
             END { printf "%d", s }' "$times_file")
  echo "   ($(($(date +%s) - start)) s since the start, $cpu s of CPU)"
}

run_suite() {  # build-dir ctest-args...
  dir=$1
  shift
  ctest --test-dir "$dir" --output-on-failure --timeout 900 -j "$jobs" "$@"
}

build_pid=
start_build() {  # log script: starts the script in its own process group, niced, in the background
  setsid nice -n 19 "$2" > "$1" 2>&1 &
  build_pid=$!
}
finish_build() {  # log: waits for the background build; shows its log if it failed
  if ! wait "$build_pid"; then
    cat "$1"
    echo "the build failed (its log: $1)" >&2
    exit 1
  fi
  build_pid=
  tail -n 1 "$1"
}
stop_build() {  # on exit: a build still running (a stage failed) is stopped with its compilers
  if [ -n "$build_pid" ]; then kill -- "-$build_pid" 2> /dev/null || true; fi
  rm -f "$times_file"
}
trap stop_build EXIT
trap 'exit 1' INT TERM HUP

echo "== Release build and tests (the ASan+UBSan build beside them, but for the WAN emulator's)"
./scripts/build.sh
elapsed
start_build build-asan.log ./scripts/asan_build.sh
run_suite build -LE wan
finish_build build-asan.log
run_suite build -L wan
elapsed

echo "== ASan+UBSan tests (the TSan build beside them, but for the WAN emulator's)"
start_build build-tsan.log ./scripts/tsan_build.sh
asan_suite() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_suite build-asan "$@"
}
asan_suite -LE wan
finish_build build-tsan.log
asan_suite -L wan
elapsed

echo "== TSan tests"
# UCX_MEM_EVENTS=no: UCX's memory hooks (libucm patches madvise) crash under TSan's interceptors
# when a thread exits; hmc needs no memory events (they serve UCX's RDMA registration cache).
# FI_OFI_RXM_MSG_RX_SIZE=32: libfabric's rxm fills its receive buffers as an endpoint opens (128 a
# connection by default, 4096 in a shared receive context), and TSan shadows every page of them;
# with 32 the transport tests over rxm take 32 s instead of 77. The eager limit and the protocols
# stay the default.
FI_OFI_RXM_MSG_RX_SIZE=32 UCX_MEM_EVENTS=no TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
  run_suite build-tsan -R 'ChannelContract|TcpTransport|ProvenLinkTransport|Coordinator|Inproc|HostReduce|HostilePeer|ForgedOffer|PointToPoint|ProtectedLink|ManInTheMiddle|LinkProtection|AverageRound|PartsOfDifferentSizes|WorkerPool|Work\.'
elapsed

echo "== fuzz targets (clang libFuzzer, the ASan+UBSan build's), briefly from their committed seeds"
./scripts/fuzz.sh 10
elapsed

echo "== all suites passed"
