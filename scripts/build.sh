#!/bin/sh
# Configures and builds hmc into build/ (Release). Extra arguments go to cmake's configure step.
set -eu
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > build-configure.log 2>&1 || {
  cat build-configure.log
  exit 1
}
grep '^-- hmc:' build-configure.log || true
cmake --build build --parallel
