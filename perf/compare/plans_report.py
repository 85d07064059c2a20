#!/usr/bin/python3
"""Tables from perf/compare/plans.sh's CSV: per topology and size, each plan's median time over
the rounds, its bus bandwidth, egress, error and its ratio to the fastest forced plan.

  perf/compare/plans_report.py [CSV] > perf/results/plans.md
"""
import csv
import statistics
import sys
from collections import defaultdict


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "perf/results/plans.csv"
    runs = defaultdict(list)
    info = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            key = (row["topology"], row["scale"], row["size"])
            runs[key + (row["label"],)].append(float(row["time_us"]) / 1e6)
            info[key + (row["label"],)] = row
    groups = sorted({k[:3] for k in runs})
    for topology, scale, size in groups:
        labels = [k[3] for k in runs if k[:3] == (topology, scale, size)]
        medians = {l: statistics.median(runs[(topology, scale, size, l)]) for l in labels}
        forced = [l for l in labels if not l.startswith("auto")]
        best = min(forced, key=medians.get) if forced else None
        print(f"### {topology}, rates × {scale}, {size} f32 sum\n")
        print("| plan | runs | median s | busbw Gbit/s | egress $/GB averaged | rel. L2 error | "
              "× fastest forced | what ran |")
        print("|---|---|---|---|---|---|---|---|")
        for l in sorted(labels, key=medians.get):
            r = info[(topology, scale, size, l)]
            ratio = medians[l] / medians[best] if best else float("nan")
            times = ", ".join(f"{t:.2f}" for t in runs[(topology, scale, size, l)])
            print(f"| {l} | {times} | {medians[l]:.2f} | {float(r['busbw_gbps']) * 8:.3f} | "
                  f"{r['usd_per_gb'] or '–'} | {r['l2_error'] or '–'} | {ratio:.2f} | "
                  f"{r['plan']} |")
        print()


if __name__ == "__main__":
    main()
