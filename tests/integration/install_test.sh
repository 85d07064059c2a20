#!/bin/sh
# hmc as a library others build on. Installs this build into a temporary prefix, then:
#  1. compiles every installed header alone, against the prefix only: no public header reaches
#     for one that was not installed;
#  2. builds examples/using_hmc with find_package(hmc) and
#  3. the same program with pkg-config (hmc.pc),
# and runs each on 2 ranks with the installed hmcrun: both must average correctly.
#   tests/integration/install_test.sh BUILD_DIR
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
work=$(mktemp -d /tmp/hmc-install-test-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "install test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install failed"; }
[ -f "$prefix/lib/cmake/hmc/hmcConfig.cmake" ] || fail "no hmcConfig.cmake"
[ -f "$prefix/lib/pkgconfig/hmc.pc" ] || fail "no hmc.pc"
[ -x "$prefix/bin/hmcrun" ] || fail "no hmcrun"

headers=0
for header in $(cd "$prefix/include/hmc" && find . -name '*.h' ! -path './ddp/*' | sed 's|^\./||'); do
  printf '#include "%s"\n' "$header" |
    c++ -std=c++20 -fsyntax-only -I"$prefix/include/hmc" -x c++ - 2> "$work/header.log" ||
    { cat "$work/header.log"; fail "$header does not compile alone against the installed headers"; }
  headers=$((headers + 1))
done
[ "$headers" -ge 10 ] || fail "only $headers public headers installed"
[ ! -e "$prefix/include/hmc/transports/tcp" ] || fail "transport internals were installed"

run_two_ranks() {  # PROGRAM: two ranks under the installed hmcrun, each must report its average
  "$prefix/bin/hmcrun" -np 2 "$1" > "$work/run.log" 2>&1 || { cat "$work/run.log"; fail "$1 failed"; }
  for rank in 0 1; do
    grep -q "rank $rank of 2: averaged 1048576 floats, correct" "$work/run.log" ||
      { cat "$work/run.log"; fail "$1: rank $rank did not report a correct average"; }
  done
}

cmake -S "$src/examples/using_hmc" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "find_package(hmc) failed"; }
cmake --build "$work/cmake" > "$work/build.log" 2>&1 ||
  { cat "$work/build.log"; fail "building against hmc::hmc failed"; }
run_two_ranks "$work/cmake/average_gradients"

flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs hmc) ||
  fail "pkg-config hmc failed"
# shellcheck disable=SC2086 # The flags are words.
c++ "$src/examples/using_hmc/average_gradients.cc" -o "$work/average_gradients_pc" $flags ||
  fail "building with pkg-config's flags failed: $flags"
run_two_ranks "$work/average_gradients_pc"
echo "install test: $headers public headers compile alone; find_package and pkg-config builds ran"
