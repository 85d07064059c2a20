#!/bin/sh
# hmc's all-reduce over an emulated topology with a fixed number of streams per peer against the
# count its probe chooses (--streams=0), alternated ROUNDS times; prints each run and the probe's
# line. Needs root.
#   [EXTRA="--chunk_bytes=..."] perf/compare/streams.sh TOPOLOGY [SIZE=256M] [SCALE=0.1] [ROUNDS=2]
#                                                      [STREAMS="4 8 16 32"]
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
  for streams in $fixed 0; do
    perf/wanem/run.sh $prefix build/bin/hmc-perf -b "$size" -e "$size" -i 1 -w 0 -k 0 \
      --streams="$streams" ${EXTRA:-} | awk -v r="$round" -v s="$streams" '
        /^# streams per peer/ { print "round " r " probe: " substr($0, 3) }
        $1 ~ /^[0-9]+$/ { printf "round %s streams %s: %.2f s, busbw %.1f Mbit/s\n", r, s == 0 ? "auto" : s, $5 / 1e6, $7 * 8000 }'
  done
  round=$((round + 1))
done
