#!/bin/sh
# The side-by-side benchmark on loopback, small: every system (hmc, Gloo's four algorithms, Open
# MPI, torch.distributed) must run, report a row per size with #wrong 0 (each checked its result
# against a reference), and the report must write its table and plot. Four ranks: Gloo's bcube is
# only correct for n = c·base^x with c < base (pytorch/gloo#184); on three ranks it returns wrong
# sums without an error (#wrong 7680 of 16384 at 64 KiB, which this check caught).
#   tests/integration/compare_suite_test.sh BIN_DIR
set -eu
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/hmc-compare-test-XXXXXX)
trap 'rm -rf "$out"' EXIT
BIN=$1 CSV=$out/compare.csv ROUNDS=1 RANKS=4 SIZES="64K 1M 4" ITERS=1 WARMUP=0 \
  perf/compare/suite.sh loopback > "$out/suite.log" 2>&1 || { cat "$out/suite.log"; exit 1; }
status=0
for system in hmc gloo-ring gloo-ring_chunked gloo-halving_doubling gloo-bcube mpi torch; do
  rows=$(awk -F, -v s="$system" '$4 == s && $9 == 0' "$out/compare.csv" | wc -l)
  if [ "$rows" -ne 3 ]; then
    echo "$system: $rows correct rows of 3" >&2
    status=1
  fi
done
/usr/bin/python3 perf/compare/report.py "$out/compare.csv" "$out" > /dev/null
[ -s "$out/compare.md" ] && [ -s "$out/compare-loopback.png" ] || { echo "no report" >&2; exit 1; }
[ $status -eq 0 ] || cat "$out/suite.log"
exit $status
