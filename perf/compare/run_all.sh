#!/bin/sh
# The comparison recorded in perf/RESULTS.md and the README: every system on loopback, one zone,
# US+EU and the four continents (rates × 0.1, MTU 9000), then the report. About 45 minutes on the
# 2-core development machine, most of it the baselines at 256 MiB across the per-flow cap.
# Needs root. Writes perf/results/compare.csv (replaced), compare.md and compare-*.png.
#   perf/compare/run_all.sh [--from-us-eu]
set -eu
cd "$(dirname "$0")/../.."
export CSV=perf/results/compare.csv
suite=perf/compare/suite.sh
t=perf/topologies
if [ "${1:-}" != --from-us-eu ]; then  # --from-us-eu keeps loopback and one zone, redoes the rest.
  rm -f "$CSV"
  ROUNDS=3 SIZES="1M 256M 4" ITERS=3 WARMUP=1 $suite loopback
  ROUNDS=2 SIZES="1M 64M 4" ITERS=3 WARMUP=1 $suite $t/one-zone.topo
fi
ROUNDS=2 SIZES="1M 16M 4" ITERS=1 WARMUP=1 $suite $t/us-eu.topo
# The target: 256 MiB across US+EU. One timed run each, unchecked (every system was checked at
# the smaller sizes above), or the baselines alone would take most of an hour per round. Gloo's
# plain ring, twice as slow as its chunked ring at every size above, is left out here.
ROUNDS=2 SIZES="256M 256M 2" ITERS=1 WARMUP=0 CHECK=0 \
  SYSTEMS="hmc gloo-ring_chunked gloo-halving_doubling gloo-bcube mpi torch" $suite $t/us-eu.topo
ROUNDS=2 SIZES="1M 16M 4" ITERS=1 WARMUP=0 SYSTEMS="hmc gloo-ring_chunked mpi torch" \
  $suite $t/four-continents.topo
ROUNDS=2 SIZES="64M 256M 4" ITERS=1 WARMUP=0 CHECK=0 SYSTEMS="hmc" $suite $t/four-continents.topo
/usr/bin/python3 perf/compare/report.py "$CSV" perf/results
