#!/bin/sh
# Every plan benchmark of perf/RESULTS.md ("Averaging across zones"), into perf/results/plans.csv
# and perf/results/plans.md (about an hour; needs root for hmc-wanem):
#   1. four continents, 8 hosts, 256 MiB: flat ring vs hierarchical with and without int8;
#   2. one slow peer: butterfly with equal and balanced shares, the other plans, the tuner;
#   3. the tuner against every forced algorithm on every shipped topology, 64 MiB;
#   4. one run per codec on the four continents (egress per GB and error of the average).
set -eu
cd "$(dirname "$0")/../.."
plans=perf/compare/plans.sh
t=perf/topologies
SIZE=256M SCALE=0.02 ROUNDS=2 ITERS=1 $plans $t/four-continents.topo 'ring=--algo=ring' \
  'hierarchical=--algo=hierarchical' 'hierarchical+int8=--algo=hierarchical --codec_inter=int8'
SIZE=32M SCALE=0.3 ROUNDS=2 ITERS=1 $plans $t/hybrid-slow-peer.topo \
  'butterfly equal shares=--algo=butterfly --shares=equal' 'butterfly balanced shares=--algo=butterfly' \
  'ring=--algo=ring' 'hierarchical=--algo=hierarchical' 'auto=--algo=auto'
for spec in four-continents:0.05 us-eu:0.1 multicloud-us:0.1 hybrid:0.1 one-zone:0.1; do
  SIZE=64M SCALE=${spec#*:} ROUNDS=2 ITERS=1 $plans $t/${spec%%:*}.topo 'ring=--algo=ring' \
    'butterfly=--algo=butterfly' 'hierarchical=--algo=hierarchical' 'auto=--algo=auto'
done
set --
for codec in none fp16 bf16 int8 uniform8 quantile8 topk powersgd; do
  set -- "$@" "codec $codec=--algo=hierarchical --codec_inter=$codec"
done
SIZE=16M SCALE=0.05 ROUNDS=1 ITERS=1 $plans $t/four-continents.topo "$@"
perf/compare/plans_report.py > perf/results/plans.md
