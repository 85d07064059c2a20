#!/usr/bin/python3
"""torch.distributed all_reduce (gloo backend) measured the way hmc-perf measures hmc.

Debian's python3-torch lives in /usr/bin/python3's packages, so run it with that interpreter.

  perf/compare/torch_allreduce.py -n 4 -b 64M -e 64M          # N local ranks on 127.0.0.1
  HMC_TORCH_RANK=r HMC_TORCH_SIZE=n HMC_TORCH_MASTER=ADDR:PORT perf/compare/torch_allreduce.py ...
                                                              # one rank (emulated hosts)

In the second form GLOO_SOCKET_IFNAME names the interface to use, else gloo binds to the address
the host name resolves to. Prints the nccl-tests style table that hmc-perf prints (rank 0), with
#wrong from a final run checked against a reference computed in closed form.
"""
import argparse
import os
import subprocess
import sys
import time


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def pattern(torch, count, rank):
    # Small multiples of 1/4: every partial sum is exact in f32, whatever the reduction order.
    index = torch.arange(count, dtype=torch.int64)
    return ((index % 17) - 8).to(torch.float32) * 0.25 * (rank + 1)


def run_rank(args, rank, size, master):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{master}", rank=rank,
                            world_size=size)
    if rank == 0:
        print(f"# torch allreduce: {size} ranks, dtype float, op sum (torch {torch.__version__},"
              " gloo backend)")
        print("#%12s %12s %8s %6s %12s %10s %10s %8s" %
              ("size", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong"))
        print("#%12s %12s %8s %6s %12s %10s %10s %8s" %
              ("(B)", "(elements)", "", "", "", "(GB/s)", "(GB/s)", ""), flush=True)
    total_wrong = 0
    size_bytes = args.min_bytes
    while size_bytes <= args.max_bytes:
        count = size_bytes // 4
        data = torch.zeros(count, dtype=torch.float32)
        times = []
        for it in range(args.warmup + args.iterations):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(data)
            # The call lasts until its slowest rank is done.
            slowest = torch.tensor([(time.perf_counter() - start) * 1e6], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            if it >= args.warmup:
                times.append(float(slowest))
        wrong = torch.tensor([-1], dtype=torch.int64)
        if args.check:
            data = pattern(torch, count, rank)
            dist.barrier()
            dist.all_reduce(data)
            expected = pattern(torch, count, 0) * (size * (size + 1) // 2)
            wrong = torch.tensor([int((data != expected).sum())], dtype=torch.int64)
            dist.all_reduce(wrong)
            total_wrong += int(wrong)
        if rank == 0:
            times.sort()
            us = times[len(times) // 2]
            algbw = count * 4 / us / 1e3
            print(" %12d %12d %8s %6s %12.1f %10.3f %10.3f %8d" %
                  (count * 4, count, "float", "sum", us, algbw,
                   algbw * 2 * (size - 1) / size, int(wrong)), flush=True)
        size_bytes = max(size_bytes + 1, int(size_bytes * args.factor))
    # A rank that leaves first would close sockets a peer still reads.
    dist.barrier()
    dist.destroy_process_group()
    return 0 if total_wrong == 0 else 3


def launch_local(args):
    master = f"127.0.0.1:{args.port}"
    procs = []
    for rank in range(args.n):
        env = dict(os.environ, HMC_TORCH_RANK=str(rank), HMC_TORCH_SIZE=str(args.n),
                   HMC_TORCH_MASTER=master)
        procs.append(subprocess.Popen([sys.executable] + sys.argv, env=env))
    status = 0
    for p in procs:
        try:
            if p.wait(timeout=args.timeout) != 0:
                status = 1
        except subprocess.TimeoutExpired:
            status = 1
    for p in procs:  # Anything still running after a failure or the deadline is stopped.
        if p.poll() is None:
            p.kill()
            p.wait()
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=0, help="start N local ranks")
    parser.add_argument("-b", dest="min_bytes", type=parse_size, default=1 << 20)
    parser.add_argument("-e", dest="max_bytes", type=parse_size, default=64 << 20)
    parser.add_argument("-f", dest="factor", type=float, default=2)
    parser.add_argument("-i", dest="iterations", type=int, default=10)
    parser.add_argument("-w", dest="warmup", type=int, default=3)
    parser.add_argument("-k", dest="check", type=int, default=1, help="check #wrong (0/1)")
    parser.add_argument("--port", type=int, default=29511, help="rendezvous port in -n mode")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds, -n mode")
    args = parser.parse_args()
    if args.factor <= 1 or args.iterations < 1 or args.min_bytes < 4:
        parser.error("need -f > 1, -i >= 1 and -b >= 4")
    if "HMC_TORCH_RANK" in os.environ:
        return run_rank(args, int(os.environ["HMC_TORCH_RANK"]),
                        int(os.environ["HMC_TORCH_SIZE"]), os.environ["HMC_TORCH_MASTER"])
    if args.n < 1:
        parser.error("-n RANKS is required unless HMC_TORCH_RANK is set")
    return launch_local(args)


if __name__ == "__main__":
    sys.exit(main())
