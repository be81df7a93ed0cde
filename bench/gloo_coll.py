#!/usr/bin/python3
"""The peer of `cadre-perf allreduce -c 0` for torch.distributed's gloo
backend (CPU tensors): the same loop as bench/mpi_coll.c (float32, sum, out
of place: each call reduces a fresh copy of the input, as MPI's sendbuf is
left alone), per size the same iterations and warm-ups, a barrier, the timed
calls back to back, and the mean time of one call taken as the largest over
the ranks. Prints cadre-perf's first six columns (the bench scripts read the
time, column 6).

    gloo_coll.py WORLD MINBYTES MAXBYTES ITERS WARMUP [MINTIME]

MINTIME > 0 as cadre-perf's -T: runs of ITERS calls, growing, until one
takes MINTIME seconds on the slowest rank, whose mean is the time. Starts
WORLD processes on this machine (rendezvous on a loopback TCP port
picked here) and prints from rank 0. Run it with Debian's /usr/bin/python3
(python3-torch)."""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, port, minb, maxb, iters0, warm, mintime):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    torch.set_num_threads(1)
    src = torch.tensor([float(i % 8 - 3) for i in range(8)]).repeat(maxb // 32 + 1)
    if rank == 0:
        print(f"# gloo allreduce: {world} ranks, float32 sum, out-of-place, torch {torch.__version__}")
        print("# %10s %12s %8s %6s %6s %10s" % ("size", "count", "type", "redop", "root", "time"))
        sys.stdout.flush()
    size = minb
    while size <= maxb:
        count = size // 4
        inp = src[:count]
        out = torch.empty(count)
        iters, first = iters0, True
        while True:
            for it in range(-warm if first else 0, iters):
                if it == 0:
                    dist.barrier()
                    t0 = time.perf_counter()
                out.copy_(inp)
                dist.all_reduce(out)
            first = False
            t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            if mintime <= 0 or t.item() >= mintime:
                break
            want = iters * mintime * 1.2 / t.item() if t.item() > 0 else iters * 64
            iters = int(min(max(want, 2 * iters), iters * 64))
        t /= iters
        want = inp * world
        if not torch.equal(out, want):
            print(f"gloo_coll.py: rank {rank}: wrong result at {size} bytes", file=sys.stderr)
            sys.exit(1)
        if rank == 0:
            print("  %10d %12d %8s %6s %6d %10.3f" % (count * 4, count, "float32", "sum", -1,
                                                      t.item() * 1e6))
            sys.stdout.flush()
        size *= 2
    dist.destroy_process_group()


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    world, minb, maxb, iters, warm = (int(a) for a in sys.argv[1:6])
    mintime = float(sys.argv[6]) if len(sys.argv) == 7 else 0.0
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(rank_main, args=(world, port, minb, maxb, iters, warm, mintime), nprocs=world)


if __name__ == "__main__":
    main()
