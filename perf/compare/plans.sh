#!/bin/sh
# hmc's all-reduce plans side by side on one emulated topology: one process group runs every
# plan, alternated call by call, each round starting one plan later (hmc-perf --plans), so that
# every plan meets the same connections and machine load. Prints hmc-perf's table under a heading
# and appends both to OUT.
#   perf/compare/plans.sh TOPOLOGY 'PLAN; PLAN; ...'
#   e.g. perf/compare/plans.sh perf/topologies/four-continents.topo \
#          'algo=ring; algo=hierarchical codec_inter=int8; auto'
# A plan is KEY=VALUE words (algo, codec_inter, codec_intra, shares); "auto" leaves all to the
# tuner. Settings (environment): SIZE=64M  ROUNDS=3  WARMUP=1  SCALE=0.05  MTU=9000
#   OUT=perf/results/plans.md  BIN=build/bin  EXTRA= (more hmc-perf options, e.g. --streams=32)
#   TCP=cubic: the ranks' TCP congestion control. The topologies' per-flow caps are single-stream
#   measurements under Linux's default, cubic; BBR's startup (pacing at 2.9x its estimate, which
#   short messages never leave) overflows the emulated per-flow queues, and a host that defaults
#   to bbr would otherwise measure that instead.
# Needs root (hmc-wanem).
set -eu
cd "$(dirname "$0")/../.."
topology=$1
plans=$2
size=${SIZE:-64M}
scale=${SCALE:-0.05}
out=${OUT:-perf/results/plans.md}
bin=${BIN:-build/bin}
prefix=hmcp
trap '$bin/hmc-wanem down --prefix=$prefix > /dev/null 2>&1' EXIT
$bin/hmc-wanem down --prefix=$prefix > /dev/null 2>&1 || true
$bin/hmc-wanem up "$topology" --prefix=$prefix --scale="$scale" --mtu="${MTU:-9000}" > /dev/null
table=$(perf/wanem/run.sh $prefix "$bin/hmc-perf" -e "$size" -i "${ROUNDS:-3}" -w "${WARMUP:-1}" \
  --tcp_congestion="${TCP:-cubic}" ${EXTRA:-} --plans "$plans" 2>&1) || {
  echo "plans.sh: hmc-perf failed on $topology:" >&2
  echo "$table" | tail -5 >&2
  exit 1
}
{
  echo "### $(basename "$topology" .topo), rates × $scale, $size f32 sum"
  echo
  echo "\`SIZE=$size SCALE=$scale ROUNDS=${ROUNDS:-3} WARMUP=${WARMUP:-1} TCP=${TCP:-cubic}${EXTRA:+ EXTRA='$EXTRA'} perf/compare/plans.sh $topology '$plans'\`"
  echo
  echo "$table" | grep -E '^(# streams per peer|# hmc-perf plans|\||# .*, last round, rank )'
  echo
} | tee -a "$out"
