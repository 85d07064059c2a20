#!/bin/sh
# Builds the libFuzzer targets (clang, ASan+UBSan: scripts/asan_build.sh) and runs each one for
# SECONDS (default 60) from its seed corpus, one after the other; stops at the first crash, leak
# or timeout, which libFuzzer writes as crash-*/leak-*/timeout-* next to the corpus. New inputs
# that found coverage go to build-asan/fuzz/corpus/TARGET (the committed seeds stay as they are).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-"frame_fuzz coordinator_fuzz channel_fuzz inventory_fuzz topology_fuzz codec_fuzz"}
# shellcheck disable=SC2086
./scripts/asan_build.sh $targets
for target in $targets; do
  work=build-asan/fuzz/corpus/$target
  mkdir -p "$work" "build-asan/fuzz/artifacts/$target"
  echo "== $target: ${seconds}s"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build-asan/bin/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="build-asan/fuzz/artifacts/$target/" \
    "$work" "tests/fuzz/corpus/$target" 2>&1 |
    grep -E '^(stat::|#[0-9]+ +DONE|==[0-9]+==ERROR|SUMMARY|Done )' || true
  found=$(find "build-asan/fuzz/artifacts/$target" -type f)
  if [ -n "$found" ]; then
    echo "$target: found $found"
    exit 1
  fi
done
echo "== every fuzz target ran ${seconds}s without a crash, leak or timeout"
