#!/usr/bin/env python3
"""torch_ref.py: the references on the GPU machine that cadre's device figures
are compared with (issue 19), measured with what is installed there:

  - the device-to-device copy bandwidth, by torch (a cross-check of copy_bw);
  - NCCL's allreduce on one rank, float32, 8 B to 256 MiB, out of place (a
    copy: what the issue compares cadre's 1-rank allreduce with) and in place,
    called through ctypes on the libnccl that torch loaded, on torch's stream;
  - if that cannot be done, torch.distributed's all_reduce (in place only).

Lines in nccl-tests' columns (size, count, type, redop, root, time_us,
algbw_GB/s), timed with CUDA events: each size repeats until one run takes at
least 20 ms, and the line gives that run's mean. Exit 77 without torch or a
GPU (skipped), 0 otherwise. No cadre involved.
"""
import ctypes
import glob
import os
import sys
import time

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
    print(f"skipped: no torch ({e.__class__.__name__}: {e})")
    sys.exit(77)
if not torch.cuda.is_available():
    print("skipped: no GPU visible to torch")
    sys.exit(77)

MIN_RUN_S = 0.02
SIZES = [8 << k for k in range(26)]  # 8 B ... 256 MiB


def timed(fn, min_run=MIN_RUN_S):
    """Mean seconds of one fn() over a run of at least min_run seconds."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    iters = 1
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while True:
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        t = a.elapsed_time(b) / 1e3
        if t >= min_run or iters >= 1 << 20:
            return t / iters
        iters *= 2 if t <= 0 else max(2, min(64, int(min_run * 1.2 / t) + 1))


def header(what):
    print(f"# {what}")
    print(f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>9}  {'algbw':>7}")
    print(f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>9}  {'(GB/s)':>7}")


def line(size, t):
    print(f"{size:12d}  {size // 4:12d}  {'float32':>8}  {'sum':>6}  {-1:6d}  {t * 1e6:9.2f}  {size / t / 1e9:7.2f}",
          flush=True)


def copy_bw():
    n = 256 << 20
    x = torch.ones(n, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    t = timed(lambda: y.copy_(x))
    print(f"torch_ref: torch D2D copy of 256 MiB: {t * 1e3:.3f} ms, {n / t / 1e9:.1f} GB/s copied, "
          f"{2 * n / t / 1e9:.1f} GB/s memory traffic (read + write)", flush=True)


def load_nccl():
    try:
        return ctypes.CDLL("libnccl.so.2")  # torch has loaded it: found by its soname
    except OSError:
        pass
    for d in sys.path:
        for f in glob.glob(os.path.join(d, "nvidia", "nccl", "lib", "libnccl.so*")):
            try:
                return ctypes.CDLL(f)
            except OSError:
                continue
    return None


def nccl_ctypes():
    lib = load_nccl()
    if lib is None:
        print("torch_ref: no libnccl.so.2 to call directly")
        return False
    ver = ctypes.c_int(0)
    lib.ncclGetVersion(ctypes.byref(ver))
    comm = ctypes.c_void_p()
    dev = (ctypes.c_int * 1)(torch.cuda.current_device())
    rc = lib.ncclCommInitAll(ctypes.byref(comm), 1, dev)
    if rc != 0:
        print(f"torch_ref: ncclCommInitAll: error {rc}")
        return False
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    NCCL_FLOAT32, NCCL_SUM = 7, 0
    big = SIZES[-1] // 4
    src = torch.ones(big, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    errors = []

    def ar(s, d, count):
        r = lib.ncclAllReduce(ctypes.c_void_p(s.data_ptr()), ctypes.c_void_p(d.data_ptr()), count,
                              NCCL_FLOAT32, NCCL_SUM, comm, stream)
        if r != 0:
            errors.append(r)

    for inplace in (0, 1):
        header(f"NCCL {ver.value} (ctypes) allreduce, 1 rank, float32 sum, "
               f"{'in place' if inplace else 'out of place (a copy)'}; time: mean of one call")
        for size in SIZES:
            count = size // 4
            t = timed(lambda: ar(src, src if inplace else dst, count))
            if errors:
                print(f"torch_ref: ncclAllReduce: error {errors[0]}")
                return False
            line(size, t)
    lib.ncclCommDestroy(comm)
    return True


def torch_distributed():
    import torch.distributed as dist

    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    x = torch.ones(SIZES[-1] // 4, dtype=torch.float32, device="cuda")
    header(f"torch.distributed all_reduce (NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}), "
           "1 rank, float32 sum, in place; time: mean of one call")
    for size in SIZES:
        v = x[: size // 4]
        line(size, timed(lambda: dist.all_reduce(v)))
    dist.destroy_process_group()


def main():
    t0 = time.time()
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else "?"
    print(f"torch_ref: torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl}, "
          f"{p.name}, {p.total_memory / 2**30:.1f} GiB", flush=True)
    copy_bw()
    ok = False
    try:
        ok = nccl_ctypes()
    except Exception as e:  # noqa: BLE001 - fall back to torch.distributed
        print(f"torch_ref: NCCL through ctypes failed: {e.__class__.__name__}: {e}")
    if not ok:
        torch_distributed()
    print(f"torch_ref: done in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
