#!/usr/bin/python3
"""train_cv's samples/s, or its time to a test accuracy, under hmcrun, configurations side by side.

Each configuration (peers x sync mode) runs ROUNDS times; the order rotates every round so that
no configuration always runs first or last on this shared, noisy machine; the table gives medians,
the spread, and each mode's rate relative to `local` (the same ranks training without averaging:
the communication overhead per step) and to one peer.

  perf/training/train_bench.py loopback [--peers 1,2,4] [--sync local,ddp,reducer]
  perf/training/train_bench.py wan --scale 0.1 [--peers 1,2,4] [--sync ddp,collab]   # root
  (--target_batch, --delay_updates for collab; --inner_steps, --fragments for diloco;
  --codec_inter for every mode; --samples per run; a mode may carry train_cv flags of its own,
  e.g. --sync collab,collab:lr_scaling=sqrt:warmup_rounds=5)

`wan` brings up a topology with hmc-wanem (prefix hmcw; --topology, default four-continents),
runs on an inventory of its hosts (one per region first, so that 4 peers on four continents are
one per continent) and takes it down.

--time_to ACC reports instead how many seconds of training (evaluations excluded) each mode
takes to reach test accuracy ACC, from evaluations every --eval_every steps on the whole test
set over --epochs epochs (collab, whose ranks step unevenly, at the end of each epoch only); --plot FILE draws every run's accuracy against those seconds.
  perf/training/train_bench.py loopback --peers 4 --sync ddp,diloco,local --samples 60000 \\
      --epochs 2 --time_to 0.88 --eval_every 50 --plot time_to_acc.png
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")


def write_inventory(prefix, path):
    """An Ansible-style inventory of a running emulation's hosts, one per region first."""
    by_region = {}
    with open(f"/run/hmc-wanem/{prefix}/hosts") as f:
        for line in f:
            host, region, address, namespace = line.split()
            by_region.setdefault(region, []).append((host, address, namespace))
    rounds = max(len(h) for h in by_region.values())
    with open(path, "w") as out:
        out.write("[all:vars]\nansible_connection=netns\n")
        for i in range(rounds):
            for region, hosts in by_region.items():
                if i < len(hosts):
                    host, address, namespace = hosts[i]
                    out.write(f"[{region}]\n{host} ansible_host={address} netns={namespace}\n")


def run_once(where, peers, config, args, workdir):
    # A configuration is a sync mode with train_cv flags of its own: MODE[:FLAG=VALUE...].
    sync, *flags = config.split(":")
    json_path = os.path.join(workdir, f"{where}-{peers}-{config.replace(':', '_')}.jsonl")
    if os.path.exists(json_path):
        os.remove(json_path)
    program = [os.path.join(BIN, "train_cv"), f"--json={json_path}",
               f"--max_train_samples={args.samples}", f"--epochs={args.epochs}",
               f"--max_test_samples={0 if args.time_to else 500}",
               f"--sync={sync}", f"--batch={args.batch}", f"--target_batch={args.target_batch}"]
    if args.time_to and sync != "collab":  # It evaluates at epoch ends only.
        program.append(f"--eval_every={args.eval_every}")
    program += [f"--{flag}" for flag in flags]
    if sync == "collab" and args.delay_updates:
        program.append("--delay_updates")
    if sync == "diloco":
        program += [f"--inner_steps={args.inner_steps}", f"--fragments={args.fragments}"]
    if args.codec_inter:
        program.append(f"--codec_inter={args.codec_inter}")
    if where == "wan":
        command = [os.path.join(BIN, "hmcrun"), "-hosts",
                   os.path.join(workdir, "inventory.wan"), "-np", str(peers),
                   "--timeout=1800s"] + program
    else:
        command = [os.path.join(BIN, "hmcrun"), "-np", str(peers), "--timeout=1800s"] + program
    result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=1900)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-3000:] + result.stderr[-3000:])
        raise SystemExit(f"{where} {peers} peers {config}: exit {result.returncode}")
    with open(json_path) as f:
        return [json.loads(line) for line in f]


def first_epoch(records):
    """A run's first epoch line."""
    return next(r for r in records if "epoch" in r)


def accuracy_curve(records):
    """(seconds of training, test accuracy) at every evaluation, in order."""
    return [(r["train_seconds"], r["test_accuracy"]) for r in records if "test_accuracy" in r]


def time_to(curve, target):
    """Seconds of training until the first evaluation at or above `target`; None if never."""
    return next((seconds for seconds, accuracy in curve if accuracy >= target), None)


def print_time_to(where, configs, runs, args):
    print(f"| where | peers | sync | seconds to {args.time_to} (median of {args.rounds}) | "
          "runs | best test acc. | samples/s | MB across zones/epoch |")
    print("|---|---|---|---|---|---|---|---|")
    for peers_n, sync in configs:
        times = [time_to(accuracy_curve(records), args.time_to) for records in runs[(peers_n, sync)]]
        reached = sorted(t for t in times if t is not None)
        median = f"**{statistics.median(reached):.1f}**" if len(reached) == len(times) else (
            "not reached" if not reached else f"{len(reached)} of {len(times)} runs")
        shown = " / ".join("-" if t is None else f"{t:.1f}" for t in times)
        best = max(max(a for _, a in accuracy_curve(r)) for r in runs[(peers_n, sync)])
        epochs = [r for records in runs[(peers_n, sync)] for r in records if "epoch" in r]
        rate = statistics.median(e["samples_per_s"] for e in epochs)
        across = statistics.median(e["bytes_across_zones"] for e in epochs) / 1e6
        print(f"| {where} | {peers_n} | {sync} | {median} | {shown} | {best:.4f} | {rate:.0f} | "
              f"{across:.1f} |")


def plot_time_to(where, configs, runs, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for peers_n, sync in configs:
        for i, records in enumerate(runs[(peers_n, sync)]):
            curve = accuracy_curve(records)
            axes.plot([c[0] for c in curve], [c[1] for c in curve], marker=".",
                      color=f"C{configs.index((peers_n, sync))}", alpha=1 if i == 0 else 0.4,
                      label=f"{peers_n} peers, {sync}" if i == 0 else None)
    axes.axhline(args.time_to, color="grey", linestyle="--", linewidth=0.8)
    axes.set_xlabel("seconds of training (evaluations excluded)")
    axes.set_ylabel("test accuracy")
    axes.set_ylim(max(0.5, args.time_to - 0.2), min(1.0, args.time_to + 0.06))
    axes.set_title(f"train_cv, {where}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(args.plot, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("where", choices=["loopback", "wan"])
    parser.add_argument("--peers", default="1,2,4")
    parser.add_argument("--sync", default="local,ddp,reducer")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=12800)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--target_batch", type=int, default=2048)
    parser.add_argument("--delay_updates", action="store_true", help="collab: delayed updates")
    parser.add_argument("--codec_inter", default="", help="codec between zones, every mode")
    parser.add_argument("--inner_steps", type=int, default=50, help="diloco: steps per sync")
    parser.add_argument("--fragments", type=int, default=1, help="diloco: streaming fragments")
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--topology", default="four-continents", help="wan: perf/topologies/NAME.topo")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--time_to", type=float, default=0, help="report the time to this accuracy")
    parser.add_argument("--eval_every", type=int, default=50, help="--time_to: steps between evaluations")
    parser.add_argument("--plot", default="", help="--time_to: draw the accuracy curves here (PNG)")
    args = parser.parse_args()
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        # Before the runs, which a failed plot at the end would throw away.
        raise SystemExit(f"--plot needs matplotlib, which {sys.executable} lacks: Debian's "
                         "python3-matplotlib (scripts/setup.sh) is /usr/bin/python3's")
    peers = [int(p) for p in args.peers.split(",")]
    syncs = args.sync.split(",")
    configs = [(p, s) for p in peers for s in syncs
               if not (p == 1 and s.split(":")[0] not in ("local", "ddp"))]
    if args.where == "wan":
        subprocess.run([os.path.join(BIN, "hmc-wanem"), "up",
                        os.path.join(ROOT, "perf", "topologies", f"{args.topology}.topo"),
                        "--prefix=hmcw", f"--scale={args.scale}", "--mtu=9000"],
                       check=True, stdout=subprocess.DEVNULL)
    runs = {c: [] for c in configs}
    try:
        with tempfile.TemporaryDirectory() as workdir:
            if args.where == "wan":
                write_inventory("hmcw", os.path.join(workdir, "inventory.wan"))
            for r in range(args.rounds):
                order = configs[r % len(configs):] + configs[:r % len(configs)]
                for peers_n, sync in order:
                    records = run_once(args.where, peers_n, sync, args, workdir)
                    runs[(peers_n, sync)].append(records)
                    reached = time_to(accuracy_curve(records), args.time_to)
                    print(f"# round {r + 1}: {peers_n} peers {sync}: "
                          f"{first_epoch(records)['samples_per_s']:.0f} samples/s"
                          + (f", {args.time_to} after {reached} s" if args.time_to else ""),
                          file=sys.stderr)
    finally:
        if args.where == "wan":
            subprocess.run([os.path.join(BIN, "hmc-wanem"), "down", "--prefix=hmcw"],
                           stdout=subprocess.DEVNULL)
    where = "loopback" if args.where == "loopback" else f"{args.topology} x{args.scale}"
    if args.time_to:
        print_time_to(where, configs, runs, args)
        if args.plot:
            plot_time_to(where, configs, runs, args)
        return
    # The first epoch of each run.
    rates = {c: [first_epoch(records)["samples_per_s"] for records in runs[c]] for c in configs}
    extra = {c: first_epoch(runs[c][-1]) for c in configs}
    print(f"| where | peers | sync | samples/s (median of {args.rounds}) | min-max | "
          "vs local, same peers | vs 1 peer | steps | samples/step | test acc. | "
          "MB across zones/epoch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    one_peer = statistics.median(rates[(1, "local")]) if (1, "local") in rates else (
        statistics.median(rates[(1, "ddp")]) if (1, "ddp") in rates else None)
    for peers_n, sync in configs:
        median = statistics.median(rates[(peers_n, sync)])
        local = rates.get((peers_n, "local"))
        vs_local = f"{median / statistics.median(local):.3f}" if local else "-"
        vs_one = f"{median / one_peer:.2f}" if one_peer else "-"
        line = extra[(peers_n, sync)]
        print(f"| {where} | {peers_n} | {sync} | {median:.0f} | "
              f"{min(rates[(peers_n, sync)]):.0f}-{max(rates[(peers_n, sync)]):.0f} | {vs_local} | "
              f"{vs_one} | {line['steps']} | {line['samples'] / line['steps']:.0f} | "
              f"{line['test_accuracy']:.3f} | "
              f"{line['bytes_across_zones'] / 1e6:.1f} |")


if __name__ == "__main__":
    main()
