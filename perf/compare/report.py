#!/usr/bin/python3
"""Turns the rows perf/compare/suite.sh appended to a CSV into, per topology, a markdown table of
median bus bandwidth per system and size, and a PNG plot of bus bandwidth against size (one line
per system). Run with /usr/bin/python3 (Debian's python3-matplotlib).

  perf/compare/report.py [CSV=perf/results/compare.csv] [OUTDIR=perf/results]
"""
import collections
import csv
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SYSTEM_ORDER = ["hmc", "gloo-ring", "gloo-ring_chunked", "gloo-halving_doubling", "gloo-bcube",
                "mpi", "torch"]
LABELS = {"hmc": "hmc", "gloo-ring": "Gloo ring", "gloo-ring_chunked": "Gloo ring_chunked",
          "gloo-halving_doubling": "Gloo halving_doubling", "gloo-bcube": "Gloo bcube",
          "mpi": "Open MPI", "torch": "torch.distributed (gloo)"}


def human_bytes(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def load(path):
    """{topology: {(system, bytes): [busbw Gbit/s per round]}}, plus ranks, scale and rounds."""
    data = collections.defaultdict(lambda: collections.defaultdict(list))
    meta = {}
    wrong = []
    with open(path) as f:
        for row in csv.DictReader(f):
            topology = row["topology"]
            # From size and time rather than the printed busbw column, whose three decimals of
            # GB/s are too coarse for a WAN: busbw = size / time · 2(n-1)/n, in Gbit/s.
            ranks = int(row["ranks"])
            data[topology][(row["system"], int(row["bytes"]))].append(
                int(row["bytes"]) * 8 / (float(row["time_us"]) * 1e3) * 2 * (ranks - 1) / ranks)
            rounds = meta.setdefault(topology, (row["ranks"], row["scale"], set()))[2]
            rounds.add(row["round"])
            if row["wrong"] not in ("0", "-1"):
                wrong.append(row)
    return data, meta, wrong


def table(topology, cells, meta):
    ranks, scale, rounds = meta
    systems = [s for s in SYSTEM_ORDER if any(k[0] == s for k in cells)]
    sizes = sorted({k[1] for k in cells})
    lines = [f"### {topology}: {ranks} ranks" + (f", rates × {scale}" if scale != "1" else "")
             + f", median of {len(rounds)} alternated rounds, bus bandwidth in Gbit/s", "",
             "| size | " + " | ".join(LABELS[s] for s in systems)
             + " | hmc / best other |",
             "|---" * (len(systems) + 2) + "|"]
    for size in sizes:
        medians = {s: statistics.median(cells[(s, size)]) for s in systems if (s, size) in cells}
        others = [v for s, v in medians.items() if s != "hmc"]
        ratio = (f"{medians['hmc'] / max(others):.2f}×" if "hmc" in medians and others else "")
        lines.append(f"| {human_bytes(size)} | " + " | ".join(
            f"{medians[s]:.3g}" if s in medians else "–" for s in systems) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


def plot(topology, cells, meta, path):
    ranks, scale, _ = meta
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for system in SYSTEM_ORDER:
        points = sorted((size, statistics.median(v)) for (s, size), v in cells.items()
                        if s == system)
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                    linewidth=2.5 if system == "hmc" else 1.2, label=LABELS[system])
    ax.set_xscale("log", base=2)
    sizes = sorted({size for (_, size) in cells})
    ax.set_xticks(sizes, [human_bytes(size) for size in sizes])
    ax.minorticks_off()
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (Gbit/s)")
    title = f"all-reduce f32, {topology}, {ranks} ranks"
    ax.set_title(title + (f" (rates × {scale})" if scale != "1" else ""))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "perf/results/compare.csv"
    outdir = sys.argv[2] if len(sys.argv) > 2 else "perf/results"
    data, meta, wrong = load(path)
    report = []
    for topology in data:
        report.append(table(topology, data[topology], meta[topology]))
        plot(topology, data[topology], meta[topology],
             os.path.join(outdir, f"compare-{topology}.png"))
        report.append(f"![{topology}](compare-{topology}.png)\n")
    if wrong:
        report.append("**Rows with wrong results:** " + ", ".join(
            f"{r['topology']} {r['system']} {r['bytes']} B ({r['wrong']})" for r in wrong) + "\n")
    with open(os.path.join(outdir, "compare.md"), "w") as f:
        f.write("\n".join(report))
    print("\n".join(report))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
