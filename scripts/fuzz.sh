#!/bin/sh
# Builds the libFuzzer targets (clang, ASan+UBSan: scripts/asan_build.sh) and runs each one for
# SECONDS (default 60) from its seed corpus, as many at once as there are CPUs; fails if any found
# a crash, leak or timeout, which libFuzzer writes as crash-*/leak-*/timeout-* under
# build-asan/fuzz/artifacts/TARGET/ (its output: build-asan/fuzz/TARGET.log). New inputs that
# found coverage go to build-asan/fuzz/corpus/TARGET (the committed seeds stay as they are).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-"frame_fuzz coordinator_fuzz channel_fuzz inventory_fuzz topology_fuzz codec_fuzz"}
# shellcheck disable=SC2086
./scripts/asan_build.sh $targets
run_target() {  # target: runs it from its corpus; prints libFuzzer's summary lines at once
  work=build-asan/fuzz/corpus/$1
  mkdir -p "$work" "build-asan/fuzz/artifacts/$1"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build-asan/bin/$1" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="build-asan/fuzz/artifacts/$1/" \
    "$work" "tests/fuzz/corpus/$1" > "build-asan/fuzz/$1.log" 2>&1 || true
  summary=$(grep -E '^(stat::|#[0-9]+ +DONE|==[0-9]+==ERROR|SUMMARY|Done )' \
    "build-asan/fuzz/$1.log" || true)
  printf '== %s: %ss\n%s\n' "$1" "$seconds" "$summary"
}
# As many targets at once as there are CPUs, each on one; then every artifact is a failure.
running=0
for target in $targets; do
  run_target "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$(nproc)" ]; then
    wait
    running=0
  fi
done
wait
found=
for target in $targets; do
  found="$found$(find "build-asan/fuzz/artifacts/$target" -type f)"
done
if [ -n "$found" ]; then
  echo "found: $found"
  exit 1
fi
echo "== every fuzz target ran ${seconds}s without a crash, leak or timeout"
