#!/usr/bin/env python3
"""torch_allreduce.py: PyTorch's torch.distributed.all_reduce (NCCL backend) swept over message
sizes, printed in the same columns as `xstream collectives`, for side-by-side comparison.

Launch one process per GPU with torchrun (or `python3 -m torch.distributed.run`):
    torchrun --standalone --nproc_per_node=2 scripts/torch_allreduce.py --min-bytes 8 --max-bytes 1G

The options are named so that none is a prefix of one of torchrun's own: torchrun's parser
reads every option-like word of the command line, the script's too, and refuses an ambiguous
abbreviation (`--max` would match `--max-restarts`).

Per size: float32 tensors on each rank's GPU, WARMUP untimed calls, ITERS timed calls issued
back to back, then torch.cuda.synchronize(); the time is the wall time / ITERS (like nccl-tests
and `xstream collectives`). algbw = bytes / time; busbw = algbw * 2(n-1)/n. Rank 0 prints.
Prints "SKIP: ..." and exits 0 when torch, CUDA or NCCL is missing.
"""
import argparse
import os
import sys
import time


def parse_size(s):
    s = s.strip()
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:].upper(), 1)
    return int(s[:-1] if mul > 1 else s) * mul


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", dest="min", default="8")
    ap.add_argument("--max-bytes", dest="max", default="1G")
    ap.add_argument("--factor", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"SKIP: torch_allreduce: no torch ({e})")
        return 0
    if not torch.cuda.is_available() or not dist.is_nccl_available():
        print("SKIP: torch_allreduce: CUDA or NCCL unavailable in torch")
        return 0
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    lo, hi = parse_size(a.min), parse_size(a.max)
    buf = torch.ones(hi // 4, dtype=torch.float32, device="cuda")
    if rank == 0:
        print(f"# torch.distributed.all_reduce f32 sum on {world} ranks (torch {torch.__version__}, "
              f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {torch.cuda.get_device_name()})")
        print(f"# {'size(B)':>12} {'count':>12} {'type':>6} {'redop':>6} {'time(us)':>12} "
              f"{'algbw(GB/s)':>10} {'busbw(GB/s)':>10} {'check':>6}")
    size = lo
    total = 0.0
    n = 0
    while size <= hi:
        count = max(size // 4, 1)
        t = buf[:count]
        # Correctness once per size: ones summed over the ranks.
        t.fill_(1.0)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        ok = bool((t[: min(count, 1 << 20)] == world).all().item())
        for _ in range(a.warmup):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) * 1e6 / a.iters
        algbw = count * 4 / us / 1e3
        busbw = algbw * 2 * (world - 1) / world
        total += busbw
        n += 1
        if rank == 0:
            print(f"  {count * 4:>12} {count:>12} {'f32':>6} {'sum':>6} {us:>12.2f} "
                  f"{algbw:>10.3f} {busbw:>10.3f} {'ok' if ok else 'WRONG':>6}", flush=True)
        size *= a.factor
    if rank == 0:
        print(f"# average bus bandwidth: {total / max(n, 1):.3f} GB/s over {n} sizes")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
