#!/bin/sh
# hmc's all-reduce over an emulated topology with a fixed number of streams per peer against the
# count the creation probe chooses alone (probe: --streams=0 --adapt_streams=0) and against the
# probe followed by adaptive streams (adapt: --streams=0 --adapt_streams=1), alternated ROUNDS times.
# Each run creates a new group and times ITERS calls per size after WARMUP; prints each run's
# median time per call and bus bandwidth, and the probe's line. Needs root.
#   [EXTRA="--algo=ring"] [ITERS=1] [WARMUP=0] [MTU=9000] [MAX_SIZE=SIZE] [FACTOR=2] [TCP=cubic]
#   perf/compare/streams.sh TOPOLOGY [SIZE=256M] [SCALE=0.1] [ROUNDS=2] [STREAMS="4 8 16 32"]
# Sizes run from SIZE to MAX_SIZE by FACTOR, in one group per run. TCP: the ranks' congestion
# control, cubic as in plans.sh (the topologies' per-flow caps are measurements under it). Under
# BBR, this machine's default, every stream count met the per-flow policers in stall episodes a
# few seconds after its links first carried data, and a short run measured where they fell
# (perf/RESULTS.md, "BBR in the emulated hosts"). Under cubic a 100 ms path warms up for about
# 15 calls of 8 MiB: give WARMUP enough of them.
set -eu
cd "$(dirname "$0")/../.."
topology=$1
size=${2:-256M}
scale=${3:-0.1}
rounds=${4:-2}
fixed=${5:-4 8 16 32}
prefix=hmcst
wanem=build/bin/hmc-wanem
trap '$wanem down --prefix=$prefix > /dev/null 2>&1' EXIT
$wanem up "$topology" --prefix=$prefix --scale="$scale" --mtu="${MTU:-9000}" > /dev/null
round=0
while [ "$round" -lt "$rounds" ]; do
  for streams in $fixed probe adapt; do
    case $streams in
      probe) flags="--streams=0 --adapt_streams=0" ;;
      adapt) flags="--streams=0 --adapt_streams=1" ;;
      *) flags="--streams=$streams" ;;
    esac
    perf/wanem/run.sh $prefix build/bin/hmc-perf -b "$size" -e "${MAX_SIZE:-$size}" \
      -f "${FACTOR:-2}" -i "${ITERS:-1}" -w "${WARMUP:-0}" -k 0 --tcp_congestion="${TCP:-cubic}" \
      $flags ${EXTRA:-} |
      awk -v r="$round" -v s="$streams" '
        /^# streams per peer/ { print "round " r " " s ": " substr($0, 3) }
        $1 ~ /^[0-9]+$/ { printf "round %s streams %s size %s: %.3f s, busbw %.1f Mbit/s\n", r, s, $1, $5 / 1e6, $7 * 8000 }'
  done
  round=$((round + 1))
done
