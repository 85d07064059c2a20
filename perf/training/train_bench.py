#!/usr/bin/env python3
"""train_cv's samples/s under hmcrun, configurations side by side.

Each configuration (peers x sync mode) runs ROUNDS times; the order rotates every round so that
no configuration always runs first or last on this shared, noisy machine; the table gives medians,
the spread, and each mode's rate relative to `local` (the same ranks training without averaging:
the communication overhead per step) and to one peer.

  perf/training/train_bench.py loopback [--peers 1,2,4] [--sync local,ddp,reducer]
  perf/training/train_bench.py wan --scale 0.1 [--peers 1,2,4] [--sync ddp,collab]   # root
  (--target_batch, --delay_updates for collab; --inner_steps, --fragments for diloco;
  --codec_inter for every mode; --samples per run; a mode may carry train_cv flags of its own,
  e.g. --sync collab,collab:lr_scaling=sqrt:warmup_rounds=5)

`wan` brings up perf/topologies/four-continents.topo with hmc-wanem (prefix hmcw), runs on
examples/inventory.wan (whose first four hosts are one per continent) and takes it down.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")


def run_once(where, peers, config, args, workdir):
    # A configuration is a sync mode with train_cv flags of its own: MODE[:FLAG=VALUE...].
    sync, *flags = config.split(":")
    json_path = os.path.join(workdir, f"{where}-{peers}-{config.replace(':', '_')}.jsonl")
    if os.path.exists(json_path):
        os.remove(json_path)
    program = [os.path.join(BIN, "train_cv"), f"--json={json_path}",
               f"--max_train_samples={args.samples}", "--max_test_samples=500",
               f"--sync={sync}", f"--batch={args.batch}", f"--target_batch={args.target_batch}"]
    program += [f"--{flag}" for flag in flags]
    if sync == "collab" and args.delay_updates:
        program.append("--delay_updates")
    if sync == "diloco":
        program += [f"--inner_steps={args.inner_steps}", f"--fragments={args.fragments}"]
    if args.codec_inter:
        program.append(f"--codec_inter={args.codec_inter}")
    if where == "wan":
        command = [os.path.join(BIN, "hmcrun"), "-hosts",
                   os.path.join(ROOT, "examples", "inventory.wan"), "-np", str(peers),
                   "--timeout=900s"] + program
    else:
        command = [os.path.join(BIN, "hmcrun"), "-np", str(peers), "--timeout=900s"] + program
    result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=1000)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-3000:] + result.stderr[-3000:])
        raise SystemExit(f"{where} {peers} peers {config}: exit {result.returncode}")
    with open(json_path) as f:
        return json.loads(f.readline())


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
    args = parser.parse_args()
    peers = [int(p) for p in args.peers.split(",")]
    syncs = args.sync.split(",")
    configs = [(p, s) for p in peers for s in syncs
               if not (p == 1 and s.split(":")[0] not in ("local", "ddp"))]
    if args.where == "wan":
        subprocess.run([os.path.join(BIN, "hmc-wanem"), "up",
                        os.path.join(ROOT, "perf", "topologies", "four-continents.topo"),
                        "--prefix=hmcw", f"--scale={args.scale}", "--mtu=9000"],
                       check=True, stdout=subprocess.DEVNULL)
    rates = {c: [] for c in configs}
    extra = {}
    try:
        with tempfile.TemporaryDirectory() as workdir:
            for r in range(args.rounds):
                order = configs[r % len(configs):] + configs[:r % len(configs)]
                for peers_n, sync in order:
                    line = run_once(args.where, peers_n, sync, args, workdir)
                    rates[(peers_n, sync)].append(line["samples_per_s"])
                    extra[(peers_n, sync)] = line
                    print(f"# round {r + 1}: {peers_n} peers {sync}: "
                          f"{line['samples_per_s']:.0f} samples/s", file=sys.stderr)
    finally:
        if args.where == "wan":
            subprocess.run([os.path.join(BIN, "hmc-wanem"), "down", "--prefix=hmcw"],
                           stdout=subprocess.DEVNULL)
    where = "loopback" if args.where == "loopback" else f"four continents x{args.scale}"
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
