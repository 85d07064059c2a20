#!/bin/sh
# hmc's all-reduce plans side by side on one emulated topology: each PLAN is a label and the
# hmc-perf options that force it (or leave it to the tuner), run one after another in an order
# that rotates every round, ROUNDS times, on one bring-up of the emulator. One CSV row per run:
#   topology,scale,size,round,label,time_us,busbw_gbps,egress_usd,usd_per_gb,l2_error,plan
# perf/compare/plans_report.py turns the CSV into tables (medians, ratios to a baseline).
#   perf/compare/plans.sh TOPOLOGY 'LABEL=OPTIONS' ['LABEL=OPTIONS' ...]
#   e.g. perf/compare/plans.sh perf/topologies/four-continents.topo 'ring=--algo=ring' \
#          'hierarchical+int8=--algo=hierarchical --codec_inter=int8'
# Settings (environment): SIZE=64M  ROUNDS=2  ITERS=2  WARMUP=1  SCALE=0.05  MTU=9000
#   CSV=perf/results/plans.csv  BIN=build/bin. Needs root (hmc-wanem).
set -eu
cd "$(dirname "$0")/../.."
topology=$1
shift
size=${SIZE:-64M}
rounds=${ROUNDS:-2}
scale=${SCALE:-0.05}
csv=${CSV:-perf/results/plans.csv}
bin=${BIN:-build/bin}
prefix=hmcp
name=$(basename "$topology" .topo)
trap '$bin/hmc-wanem down --prefix=$prefix > /dev/null 2>&1' EXIT
$bin/hmc-wanem down --prefix=$prefix > /dev/null 2>&1 || true
$bin/hmc-wanem up "$topology" --prefix=$prefix --scale="$scale" --mtu="${MTU:-9000}" > /dev/null
[ -f "$csv" ] || echo "topology,scale,size,round,label,time_us,busbw_gbps,egress_usd,usd_per_gb,l2_error,plan" > "$csv"
count=$#
round=1
while [ "$round" -le "$rounds" ]; do
  i=0
  while [ "$i" -lt "$count" ]; do
    # The plan at position (i + round) in the list: each round starts one plan later.
    k=$(( (i + round - 1) % count + 1 ))
    eval "spec=\${$k}"
    label=${spec%%=*}
    options=${spec#*=}
    out=$(perf/wanem/run.sh $prefix "$bin/hmc-perf" -b "$size" -e "$size" -i "${ITERS:-2}" \
      -w "${WARMUP:-1}" -k 1 $options 2>&1) || {
      echo "plans.sh: $label failed in round $round:" >&2
      echo "$out" | tail -5 >&2
      i=$((i + 1))
      continue
    }
    # The table row (size, count, type, redop, time, algbw, busbw, wrong) and the plan line.
    row=$(echo "$out" | awk '/^ +[0-9]/ { print $5, $7 }' | tail -1)
    plan=$(echo "$out" | grep '^#   ' | tail -1 | sed 's/^#   //')
    egress=$(echo "$plan" | sed -n 's/.*egress \$\([0-9.]*\) per call, \$\([0-9.]*\) per GB.*/\1,\2/p')
    l2=$(echo "$plan" | sed -n 's/.*rel\. L2 error \([0-9.e+-]*\).*/\1/p')
    echo "$name,$scale,$size,$round,$label,$(echo "$row" | tr ' ' ','),${egress:-,},${l2:-},\"$plan\"" >> "$csv"
    echo "round $round $label: $(echo "$row" | awk '{ printf "%.2f s", $1 / 1e6 }') ($plan)"
    i=$((i + 1))
  done
  round=$((round + 1))
done
