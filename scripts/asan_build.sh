#!/bin/sh
# Configures and builds the ASan+UBSan build into build-asan/ with clang, whose instrumentation
# also serves libFuzzer: the one build runs the test suite (scripts/test.sh) and the fuzz targets
# (scripts/fuzz.sh). Arguments are targets to build (default: all).
#   scripts/asan_build.sh [TARGET...]
set -eu
cd "$(dirname "$0")/.."
if [ -f build-asan/CMakeCache.txt ] &&
  ! grep -q '^CMAKE_CXX_COMPILER:FILEPATH=.*clang' build-asan/CMakeCache.txt; then
  echo "build-asan/ was configured with a compiler other than clang: remove it and run again" >&2
  exit 1
fi
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHMC_SANITIZE=address -DHMC_WITH_GLOO=OFF -DHMC_WITH_TORCH=OFF > build-asan-configure.log 2>&1 || {
  cat build-asan-configure.log
  exit 1
}
if [ $# -gt 0 ]; then
  cmake --build build-asan --parallel --target "$@"
else
  cmake --build build-asan --parallel
fi
