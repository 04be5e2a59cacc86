#!/usr/bin/env python3
"""torch_bench.py: PyTorch's stream / event costs, for comparison with gpu_ops (xstream's bench).

Run on the GPU machine (PyTorch 2.11 cu130 there, no network):
    python3 gpu-bundle/torch_bench.py          (BENCH=1 bash gpu-bundle/gpu-run.sh runs it)

Each operation: one warm-up batch, then REPS repeats of a batch of N calls; a cell is the
host-side ns per call (time.perf_counter_ns), median with p10 and p90 over the repeats. Python's
own call overhead is in every number: the "no-op Python call" row is that floor. Prints a
Markdown table (last) and a JSON line; writes $OUT/torch_bench.md when $OUT is set. Prints
"SKIP: ..." and exits 0 when torch or a CUDA device is missing.

Notes on what PyTorch does underneath:
- torch.cuda.Stream() takes a handle from PyTorch's stream pool (no cudaStreamCreate per call).
- torch.cuda.Event() is lazy: the CUDA event is created at the first record() and destroyed when
  the Python object goes away; so "create+destroy" is measured as Event() + first record + del.
- PyTorch has no public host-callback API: those rows are n/a.
- The smallest kernel is torch.cuda._sleep(0) (a clock-spin kernel; private API).
"""
import json
import os
import sys
import time

REPS = 7


def stat(v):
    s = sorted(v)
    at = lambda q: s[int(round((len(s) - 1) * q))]
    return {"med": at(0.5), "p10": at(0.1), "p90": at(0.9)}


def fmt_ns(v):
    if abs(v) < 10_000:
        return f"{v:.0f} ns"
    if abs(v) < 10_000_000:
        return f"{v / 1e3:.1f} µs"
    return f"{v / 1e6:.2f} ms"


def fmt_cell(s):
    if s is None:
        return "n/a"
    m = s["med"]
    div, unit, p = (1, "ns", 0) if m < 10_000 else ((1e3, "µs", 1) if m < 10_000_000 else (1e6, "ms", 1))
    return f"{m / div:.{p}f} {unit} ({s['p10'] / div:.{p}f}–{s['p90'] / div:.{p}f})"


def measure(batch, n):
    """batch(n) -> ns for the timed part of n calls."""
    batch(n)
    return stat([batch(n) / n for _ in range(REPS)])


def loop(fn):
    """A batch that calls fn() n times."""

    def b(n):
        r = range(n)
        t0 = time.perf_counter_ns()
        for _ in r:
            fn()
        return time.perf_counter_ns() - t0

    return b


def main():
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"SKIP: torch_bench: torch is not importable: {e}")
        return 0
    if not torch.cuda.is_available():
        print("SKIP: torch_bench: torch.cuda.is_available() is False")
        return 0

    t_start = time.perf_counter()
    torch.cuda.init()
    dev = torch.cuda.current_device()
    name = torch.cuda.get_device_name(dev)
    print(f"torch_bench: torch {torch.__version__}, CUDA {torch.version.cuda}, {name}", file=sys.stderr)
    sa = torch.cuda.Stream()
    sb = torch.cuda.Stream()
    e = torch.cuda.Event(enable_timing=False)
    e.record(sa)
    sa.synchronize()
    has_sleep = hasattr(torch.cuda, "_sleep")

    rows = []

    def row(op, n, batch, note=""):
        try:
            s = measure(batch, n) if batch is not None else None
        except Exception as ex:  # noqa: BLE001
            s, note = None, f"error: {ex}"
        rows.append({"op": op, "iters": n, "torch": s, "note": note})
        print(f"  {op:<58} {fmt_cell(s):>28} {note}", file=sys.stderr)

    def noop():
        pass

    row("no-op Python call (floor of every row)", 200_000, loop(noop))
    row("stream create (torch.cuda.Stream(), pooled) + del", 20_000,
        loop(lambda: torch.cuda.Stream()), "pool handle, no cudaStreamCreate")

    def ev_create(timing):
        def f():
            ev = torch.cuda.Event(enable_timing=timing)
            ev.record(sa)
            del ev
        return f

    row("Event(enable_timing=False) construct + del (lazy)", 50_000,
        loop(lambda: torch.cuda.Event(enable_timing=False)), "no CUDA call")
    row("event create+destroy (DISABLE_TIMING: Event()+1st record+del)", 20_000,
        loop(ev_create(False)), "includes one record")
    row("event create+destroy (timing: Event()+1st record+del)", 20_000,
        loop(ev_create(True)), "includes one record")
    sa.synchronize()

    def rec_batch(n):
        rec = e.record
        r = range(n)
        t0 = time.perf_counter_ns()
        for _ in r:
            rec(sa)
        d = time.perf_counter_ns() - t0
        sa.synchronize()
        return d

    row("event record (idle stream)", 50_000, rec_batch)
    row("event query (complete)", 100_000, loop(e.query))
    row("stream query (idle)", 100_000, loop(sa.query))

    def rec_wait_batch(n):
        rec, wait = e.record, sb.wait_event
        r = range(n)
        t0 = time.perf_counter_ns()
        for _ in r:
            rec(sa)
            wait(e)
        d = time.perf_counter_ns() - t0
        sb.synchronize()
        return d

    row("record on A + wait on B", 50_000, rec_wait_batch)
    row("synchronize (idle stream)", 50_000, loop(sa.synchronize))
    row("event synchronize (complete)", 50_000, loop(e.synchronize))
    row("host callback enqueue / round trip", 0, None, "n/a: no public host-callback API")

    sync_rows = []
    if has_sleep:
        sleep = torch.cuda._sleep

        def launch_batch(n):
            with torch.cuda.stream(sa):
                r = range(n)
                t0 = time.perf_counter_ns()
                for _ in r:
                    sleep(0)
                d = time.perf_counter_ns() - t0
            sa.synchronize()
            return d

        def launch_sync_batch(n):
            with torch.cuda.stream(sa):
                s = sa.synchronize
                r = range(n)
                t0 = time.perf_counter_ns()
                for _ in r:
                    sleep(0)
                    s()
                return time.perf_counter_ns() - t0

        row("kernel launch (torch.cuda._sleep(0))", 2000, launch_batch)
        row("kernel launch + synchronize", 1000, launch_sync_batch)

        def direct_batch(n):
            with torch.cuda.stream(sa):
                t0 = time.perf_counter_ns()
                for _ in range(n):
                    for _ in range(100):
                        sleep(0)
                    sa.synchronize()
                return time.perf_counter_ns() - t0

        graph_batch = None
        graph_note = ""
        try:
            g = torch.cuda.CUDAGraph()
            gs = torch.cuda.Stream()
            with torch.cuda.stream(gs):
                sleep(0)
            gs.synchronize()
            with torch.cuda.graph(g, stream=gs):
                for _ in range(100):
                    sleep(0)

            def graph_batch(n):  # noqa: F811
                with torch.cuda.stream(gs):
                    t0 = time.perf_counter_ns()
                    for _ in range(n):
                        g.replay()
                        gs.synchronize()
                    return time.perf_counter_ns() - t0
        except Exception as ex:  # noqa: BLE001
            graph_note = f"capture failed: {ex}"
        row("graph replay (100 kernel nodes) + sync", 200, graph_batch, graph_note)
        row("100 direct kernel launches + sync", 100, direct_batch)

        # ~2 ms kernel: calibrate _sleep cycles with timing events.
        try:
            t0e = torch.cuda.Event(enable_timing=True)
            t1e = torch.cuda.Event(enable_timing=True)
            cycles = 1_000_000
            with torch.cuda.stream(sa):
                sleep(cycles)
                t0e.record(sa)
                sleep(cycles)
                t1e.record(sa)
            sa.synchronize()
            ms = t0e.elapsed_time(t1e)
            cycles2 = int(cycles * 2.0 / max(ms, 1e-3))
            with torch.cuda.stream(sa):
                k0 = torch.cuda.Event(enable_timing=True)
                k1 = torch.cuda.Event(enable_timing=True)
                k0.record(sa)
                sleep(cycles2)
                k1.record(sa)
            sa.synchronize()
            kernel_ns = k0.elapsed_time(k1) * 1e6

            def sync_variant(label, wait):
                walls, cpus = [], []
                for rep in range(REPS + 1):
                    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
                    for _ in range(12):
                        with torch.cuda.stream(sa):
                            sleep(cycles2)
                        wait()
                    w = time.perf_counter_ns() - w0
                    c = time.thread_time_ns() - c0
                    if rep > 0:
                        walls.append(w / 12)
                        cpus.append(c / w * 100)
                s = stat(walls)
                sync_rows.append({"variant": label, "wall": s, "latency_ns": s["med"] - kernel_ns,
                                  "cpu_pct": stat(cpus)["med"], "kernel_ns": kernel_ns})

            sync_variant("stream.synchronize()", sa.synchronize)

            def ev_sync():
                ev = torch.cuda.Event()
                ev.record(sa)
                ev.synchronize()

            sync_variant("event.record + event.synchronize()", ev_sync)

            def spin():
                q = sa.query
                while not q():
                    pass

            sync_variant("spin on stream.query()", spin)
        except Exception as ex:  # noqa: BLE001
            print(f"torch_bench: sync section failed: {ex}", file=sys.stderr)
    else:
        row("kernel launch", 0, None, "n/a: torch.cuda._sleep missing")

    torch.cuda.synchronize()
    total = time.perf_counter() - t_start

    md = [f"### PyTorch {torch.__version__} (CUDA {torch.version.cuda}) — {name}, {REPS} reps, "
          "host ns/op median (p10–p90)\n",
          "| operation | torch | note |", "|---|---:|---|"]
    for r in rows:
        md.append(f"| {r['op']} | {fmt_cell(r['torch'])} | {r['note']} |")
    if sync_rows:
        k = sync_rows[0]["kernel_ns"]
        md.append(f"\n**Synchronize after a {fmt_ns(k)} kernel (torch.cuda._sleep)** "
                  "(latency = wall − kernel time from timing events; CPU = waiting thread)\n")
        md.append("| variant | wall | latency over kernel | thread CPU |")
        md.append("|---|---:|---:|---:|")
        for s in sync_rows:
            md.append(f"| {s['variant']} | {fmt_cell(s['wall'])} | {fmt_ns(s['latency_ns'])} | "
                      f"{s['cpu_pct']:.0f}% |")
    md.append(f"\ntotal torch bench time {total:.1f} s")
    text = "\n".join(md) + "\n"
    print(json.dumps({"bench": "torch", "torch": torch.__version__, "cuda": torch.version.cuda,
                      "device": name, "reps": REPS, "rows": rows, "sync": sync_rows},
                     separators=(",", ":")))
    print()
    print(text)
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "torch_bench.md"), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
