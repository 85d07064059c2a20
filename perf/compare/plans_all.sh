#!/bin/sh
# Every plan benchmark of perf/RESULTS.md ("Averaging across zones"), appended to
# perf/results/plans.md (about 40 minutes; needs root for hmc-wanem):
#   1. four continents, 8 hosts, 256 MiB: flat ring vs hierarchical with and without int8;
#   2. the tuner against every forced algorithm on every shipped topology, 64 MiB;
#   3. one slow peer: butterfly with equal and balanced shares, the other plans, the tuner;
#   4. every codec across zones on the four continents (egress per GB, error of the average).
set -eu
cd "$(dirname "$0")/../.."
plans=perf/compare/plans.sh
t=perf/topologies
forced='algo=ring; algo=halving_doubling; algo=butterfly; algo=hierarchical; auto'
SIZE=256M SCALE=0.02 ROUNDS=3 $plans $t/four-continents.topo \
  'algo=ring; algo=hierarchical; algo=hierarchical codec_inter=int8'
# Three warm-up rounds: auto's first calls try each candidate algorithm (HMC_EXPLORE).
for spec in one-zone:0.1 us-eu:0.1 multicloud-us:0.05 hybrid:0.05 four-continents:0.05; do
  SIZE=64M SCALE=${spec#*:} WARMUP=3 $plans $t/${spec%%:*}.topo "$forced"
done
SIZE=32M SCALE=0.5 WARMUP=3 $plans $t/hybrid-slow-peer.topo "algo=butterfly shares=equal; $forced"

codecs=''
for codec in none fp16 bf16 int8 uniform8 quantile8 topk powersgd; do
  codecs="$codecs${codecs:+; }algo=hierarchical codec_inter=$codec"
done
SIZE=16M SCALE=0.05 ROUNDS=2 $plans $t/four-continents.topo "$codecs"
