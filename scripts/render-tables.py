#!/usr/bin/env python3
"""Renders the measured tables of docs/ from the output their runs recorded.

Each rendered table sits between two markers in a doc:

    <!-- table:NAME begin -->
    ...caption line and table, written by this script...
    <!-- table:NAME end -->

and TABLES below says where NAME's figures come from: a file in a run folder
(docs/gpu-runs/*, docs/cpu-runs/*, docs/cann-runs/*) that the run itself wrote (a bench's
markdown or JSON, a test's printed table, a bench's log lines). The caption names the run
folder, its date, the device and the commit, each read from the folder (see `caption`).

    scripts/render-tables.py           rewrite every marked table from its log
    scripts/render-tables.py --check   change nothing; exit 1 and print a diff when a committed
                                       table differs from its render (CI runs this)

Python 3 standard library only. A marker without an entry in TABLES, an entry whose markers
are missing, or a source that lacks the named table is an error (exit 2), never a skip.
"""

import difflib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")

# NAME -> where it is rendered and from what. Keys:
#   doc     the doc holding the markers (relative to docs/)
#   source  the run's file (relative to docs/)
#   kind    "md" (the index-th markdown table the run wrote, optionally only the rows whose
#           first cell starts with one of `rows`), "memory" (benches/memory.rs log lines),
#           "paired" / "paired_ci" (benches/benches/any_dispatch.rs `paired` lines: the IQR
#           form, or the 95% CI form with one column per backend), "paired_runs" (the 95% CI
#           form of several runs in one log, one column per run), "stress"
#           (tests/tests/stress.rs result lines), "conform" (`xstream conform` result lines
#           of `source` and of each `more` log, one column each), "tsv" (a step summary),
#           "across" (one row per run of `runs`, the `cells` of the `ops` rows of each run's
#           `index`-th markdown table), "ledger" (one row per run folder under `roots`),
#           "before_after" (the
#           null-driver test's CPU tables in `source` and in the one `more` log, several runs
#           each: xstream - raw ns per row, median and range, and the change), "diag"
#           (benches/src/bin/gpu_ipc/diag.rs `diag:` lines), "reliability" (scripts/reliability.sh's
#           step lines, its valgrind count and summary), "lines" (the log's lines matching the
#           regular expression `match`, verbatim in a code block: a run's per-run verdict lines)
# The gpu_ops rows of issue 29's item 3 (first cells' beginnings, one row each).
ISSUE29_ROWS = [
    "stream create+destroy", "event create+destroy (DISABLE_TIMING)",
    "event create+destroy (default", "host callback enqueue", "kernel launch (xstream_delay(0)",
    "launch builder: 3 args", "launch_kernel: same 3-arg", "module launch: empty kernel",
    "write_from_host 4 KiB", "read_into_host 4 KiB", "registered upload 4 KiB",
    "chain: 4 streams", "100 direct kernel launches",
]

# The page-locked copy rows and the host-callback row (run 26: with and without the keep
# list's hand-over inside a batch).
COPY_ROWS = ["write_from_host 4 KiB", "read_into_host 4 KiB", "registered upload 4 KiB",
             "host callback enqueue"]

# Issue 29's rows with the stream-ordered pair, the idle rows and launch + synchronize (runs
# 27 and 28).
ISSUE29_MORE_ROWS = ISSUE29_ROWS + [
    "alloc_async + free_async", "idle stream query (context", "idle stream synchronize (context",
    "idle stream query (after", "idle stream synchronize (after", "kernel launch + synchronize",
]
TABLES = {
    "run33-steps": dict(
        doc="gpu-runs/2026-11-28-2xh200-run33/README.md",
        source="gpu-runs/2026-11-28-2xh200-run33/run33-summary.tsv", kind="tsv"),
    "run34-probes": dict(
        doc="gpu-runs/2026-11-28-2xh200-run34/README.md",
        source="gpu-runs/2026-11-28-2xh200-run34/run34-summary.tsv", kind="tsv"),
    "run34-steps": dict(
        doc="gpu-runs/2026-11-28-2xh200-run34/README.md",
        source="gpu-runs/2026-11-28-2xh200-run34/run23-summary.tsv", kind="tsv"),
    "run34-issue29-rows": dict(
        doc="gpu-runs/2026-11-28-2xh200-run34/README.md", source="gpu-runs/2026-11-28-2xh200-run34/gpu_bench.md",
        kind="md", index=0, rows=ISSUE29_MORE_ROWS),
    "capture-probes-38": dict(
        doc="gpu-runs/2026-11-28-h200-capture-probes/README.md",
        source="gpu-runs/2026-11-28-h200-capture-probes/run38/run38-summary.tsv", kind="tsv"),
    "run32-steps": dict(
        doc="gpu-runs/2026-11-28-2xh200-run32/README.md",
        source="gpu-runs/2026-11-28-2xh200-run32/run23-summary.tsv", kind="tsv"),
    "run32-issue29-rows": dict(
        doc="gpu-runs/2026-11-28-2xh200-run32/README.md", source="gpu-runs/2026-11-28-2xh200-run32/gpu_bench.md",
        kind="md", index=0, rows=ISSUE29_MORE_ROWS),
    "issue29-across-runs": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh200-run32/gpu_bench.md",
        kind="across", index=0, cells=[4, 6],
        runs=[(f"{n}", f"gpu-runs/{d}/gpu_bench.md") for n, d in [
            ("23 (2 × H100)", "2026-11-27-2xh100-run23"), ("25 (2 × H100)", "2026-11-28-2xh100-run25"),
            ("26 (2 × H100)", "2026-11-28-2xh100-run26"), ("27 (2 × H200)", "2026-11-28-2xh200-run27"),
            ("28 (2 × H200)", "2026-11-28-2xh200-run28"), ("29 (2 × H200)", "2026-11-28-2xh200-run29"),
            ("32 (2 × H200)", "2026-11-28-2xh200-run32"), ("34 (2 × H200)", "2026-11-28-2xh200-run34")]],
        ops=[("stream create+destroy", "stream create+destroy"),
             ("event create+destroy (timing)", "event create+destroy (default"),
             ("host callback enqueue", "host callback enqueue (empty)"),
             ("kernel launch (Delay)", "kernel launch (xstream_delay(0)"),
             ("launch builder", "launch builder: 3 args"),
             ("chain", "chain: 4 streams"),
             ("100 direct launches", "100 direct kernel launches")]),
    "run31-steps": dict(
        doc="gpu-runs/2026-11-28-2xh200-run31/README.md",
        source="gpu-runs/2026-11-28-2xh200-run31/run31-summary.tsv", kind="tsv"),
    "run31-lp-reuse": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh200-run31/lp-reuse/launch_profile.md",
        kind="md", index=0),
    "run29-steps": dict(
        doc="gpu-runs/2026-11-28-2xh200-run29/README.md",
        source="gpu-runs/2026-11-28-2xh200-run29/run23-summary.tsv", kind="tsv"),
    "run29-issue29-rows": dict(
        doc="gpu-runs/2026-11-28-2xh200-run29/README.md", source="gpu-runs/2026-11-28-2xh200-run29/gpu_bench.md",
        kind="md", index=0, rows=ISSUE29_MORE_ROWS),
    "run30-steps": dict(
        doc="gpu-runs/2026-11-28-2xh200-run30/README.md",
        source="gpu-runs/2026-11-28-2xh200-run30/run24-summary.tsv", kind="tsv"),
    "run30-exit-memcheck": dict(
        doc="gpu-runs/2026-11-28-2xh200-run30/README.md",
        source="gpu-runs/2026-11-28-2xh200-run30/exit-memcheck.txt", kind="lines", match=r"^(A|B) |PASS;"),
    "exit-c1": dict(
        doc="gpu-runs/2026-11-28-exit-bisect/README.md", source="gpu-runs/2026-11-28-exit-bisect/c1-trace/modules-1.log", kind="lines",
        match=r"^test result|^segv_trace: (pid|#0[2-9]|#1[0-6])"),
    "exit-c2": dict(
        doc="gpu-runs/2026-11-28-exit-bisect/README.md", source="gpu-runs/2026-11-28-exit-bisect/c2-ab-first/output.txt", kind="lines",
        match=r"runs died at exit"),
    "exit-c3": dict(
        doc="gpu-runs/2026-11-28-exit-bisect/README.md", source="gpu-runs/2026-11-28-exit-bisect/c3-ab-tests/exit-ab.txt", kind="lines",
        match=r"segv=[1-9]|died at exit|^ +[0-9]+ xstream"),
    "exit-c4": dict(
        doc="gpu-runs/2026-11-28-exit-bisect/README.md", source="gpu-runs/2026-11-28-exit-bisect/c4-raw-h200/exit-raw.txt", kind="lines",
        match=r"runs died at exit"),
    "exit-c6": dict(
        doc="gpu-runs/2026-11-28-exit-bisect/README.md", source="gpu-runs/2026-11-28-exit-bisect/c6-raw-h100/exit-raw.txt", kind="lines",
        match=r"runs died at exit"),
    "exit-c7": dict(
        doc="gpu-runs/2026-11-28-exit-bisect/README.md", source="gpu-runs/2026-11-28-exit-bisect/c7-bisect/exit-bisect.txt", kind="lines",
        match=r"^died|^modules-[0-9a-fHEAD]+: |^data_path:[0-9] rc"),
    "exit-c8": dict(
        doc="gpu-runs/2026-11-28-exit-bisect/README.md", source="gpu-runs/2026-11-28-exit-bisect/c8-bisect/exit-bisect.txt", kind="lines",
        match=r"^died|^modules-[0-9a-fHEAD]+: |^data_path"),
    "run28-steps": dict(
        doc="gpu-runs/2026-11-28-2xh200-run28/README.md",
        source="gpu-runs/2026-11-28-2xh200-run28/run23-summary.tsv", kind="tsv"),
    "run28-issue29-rows": dict(
        doc="gpu-runs/2026-11-28-2xh200-run28/README.md", source="gpu-runs/2026-11-28-2xh200-run28/gpu_bench.md",
        kind="md", index=0, rows=ISSUE29_MORE_ROWS),
    "callback-split-r1": dict(
        doc="gpu-runs/2026-11-28-h200-callback-split/README.md",
        source="gpu-runs/2026-11-28-h200-callback-split/r1/launch_profile.md", kind="md", index=0),
    "callback-split-r2": dict(
        doc="gpu-runs/2026-11-28-h200-callback-split/README.md",
        source="gpu-runs/2026-11-28-h200-callback-split/r2/launch_profile.md", kind="md", index=0),
    "run27-steps": dict(
        doc="gpu-runs/2026-11-28-2xh200-run27/README.md",
        source="gpu-runs/2026-11-28-2xh200-run27/run23-summary.tsv", kind="tsv"),
    "run27-issue29-rows": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh200-run27/gpu_bench.md",
        kind="md", index=0, rows=ISSUE29_MORE_ROWS),
    "run27-demo": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh200-run27/gpu_bench.md",
        kind="md", index=4),
    "run27-launch-profile": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh200-run27/launch_profile.md",
        kind="md", index=0),
    "run26-steps": dict(
        doc="gpu-runs/2026-11-28-2xh100-run26/README.md",
        source="gpu-runs/2026-11-28-2xh100-run26/run23-summary.tsv", kind="tsv"),
    "run26-vmm-default": dict(
        doc="gpu-runs/2026-11-28-2xh100-run26/README.md",
        source="gpu-runs/2026-11-28-2xh100-run26/gpu_bench.md", kind="md", index=0,
        rows=["vmm: map"]),
    "run26-vmm-flush": dict(
        doc="gpu-runs/2026-11-28-2xh100-run26/README.md",
        source="gpu-runs/2026-11-28-2xh100-run26/flush64k/gpu_bench.md", kind="md", index=0,
        rows=["vmm: map"]),
    "run26-copies-default": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh100-run26/gpu_bench.md",
        kind="md", index=0, rows=COPY_ROWS),
    "run26-copies-flush": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh100-run26/flush64k/gpu_bench.md",
        kind="md", index=0, rows=COPY_ROWS),
    "run26-launch-profile": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh100-run26/launch_profile.md",
        kind="md", index=0),
    "run25-steps": dict(
        doc="gpu-runs/2026-11-28-2xh100-run25/README.md",
        source="gpu-runs/2026-11-28-2xh100-run25/run23-summary.tsv", kind="tsv"),
    "run25-issue29-rows": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh100-run25/gpu_bench.md",
        kind="md", index=0, rows=ISSUE29_ROWS),
    "run25-launch-profile": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-28-2xh100-run25/launch_profile.md",
        kind="md", index=0),
    "run24-steps": dict(
        doc="gpu-runs/2026-11-28-2xh100-run24/README.md",
        source="gpu-runs/2026-11-28-2xh100-run24/run24-summary.tsv", kind="tsv"),
    "run24-vmm-rows": dict(
        doc="gpu-runs/2026-11-28-2xh100-run24/README.md",
        source="gpu-runs/2026-11-28-2xh100-run24/gpu_bench.md", kind="md", index=0,
        rows=["vmm: map", "expandable alloc + free, cached block (512",
              "expandable alloc + free, cached block (64", "expandable alloc + free, cached block (1 MiB"]),
    "run23-steps": dict(
        doc="gpu-runs/2026-11-27-2xh100-run23/README.md",
        source="gpu-runs/2026-11-27-2xh100-run23/run23-summary.tsv", kind="tsv"),
    "run23-issue29-rows": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-27-2xh100-run23/gpu_bench.md",
        kind="md", index=0, rows=ISSUE29_ROWS + ["idle stream query (context", "idle stream synchronize (context",
                                                "idle stream query (after", "idle stream synchronize (after",
                                                "vmm: map", "event record (idle",
                                                "record on A", "synchronize (idle",
                                                "host callback round trip", "future completion"]),
    "run23-launch-profile": dict(
        doc="hot-paths-gpu.md", source="gpu-runs/2026-11-27-2xh100-run23/launch_profile.md",
        kind="md", index=0),
    "run23-launch-functions": dict(
        doc="hot-paths-gpu.md",
        source="gpu-runs/2026-11-27-2xh100-run23/launch_profile_functions.md", kind="md",
        index=0),
    "run22-steps": dict(
        doc="gpu-runs/2026-11-27-h100-run22/README.md",
        source="gpu-runs/2026-11-27-h100-run22/run22-summary.tsv", kind="tsv"),
    "run22b-steps": dict(
        doc="gpu-runs/2026-11-27-h100-run22b/README.md",
        source="gpu-runs/2026-11-27-h100-run22b/run22b-summary.tsv", kind="tsv", cols=3),
    "run21-steps": dict(
        doc="gpu-verification.md", source="gpu-runs/2026-11-27-2xh100-run21/run21-summary.tsv",
        kind="tsv"),
    "run19-issue29-rows": dict(
        doc="hot-paths.md", source="gpu-runs/2026-11-27-2xh100-run19/gpu_bench.md",
        kind="md", index=0, rows=ISSUE29_ROWS),
    "run21-issue29-rows": dict(
        doc="hot-paths.md", source="gpu-runs/2026-11-27-2xh100-run21/gpu_bench.md",
        kind="md", index=0, rows=ISSUE29_ROWS),
    "run21-ipc-two-gpus": dict(
        doc="hot-paths.md", source="gpu-runs/2026-11-27-2xh100-run21/gpu_ipc.md",
        kind="md", index=3),
    "run21-ipc-diag": dict(
        doc="hot-paths.md", source="gpu-runs/2026-11-27-2xh100-run21/gpu_ipc.log",
        kind="diag"),
    "run20-steps": dict(
        doc="gpu-runs/2026-11-27-2xh100-run20/README.md", source="gpu-runs/2026-11-27-2xh100-run20/run20-summary.tsv",
        kind="tsv"),
    "run19-steps": dict(
        doc="gpu-runs/2026-11-27-2xh100-run19/README.md", source="gpu-runs/2026-11-27-2xh100-run19/run19-summary.tsv",
        kind="tsv"),
    "run19-data-path": dict(
        doc="gpu-runs/2026-11-27-2xh100-run19/README.md", source="gpu-runs/2026-11-27-2xh100-run19/gpu_bench.md",
        kind="md", index=0,
        rows=["write_from_host 4 KiB", "registered upload 4 KiB", "write_from_host 64 MiB",
              "registered upload 64 MiB"]),
    "ascend-sim-criterion": dict(
        doc="performance.md", source="cpu-runs/2026-11-23/tables.md", kind="md", index=0),
    "ascend-sim-paired": dict(
        doc="performance.md", source="cpu-runs/2026-11-23/tables.md", kind="md", index=1),
    "host-criterion": dict(
        doc="performance.md", source="cpu-runs/2026-11-23/tables.md", kind="md", index=2),
    "no-alloc": dict(
        doc="performance.md", source="cpu-runs/2026-11-23/tables.md", kind="md", index=3),
    "memory-2026-11-23": dict(
        doc="cpu-runs/2026-11-23/README.md", source="cpu-runs/2026-11-23/memory.log",
        kind="memory"),
    "memory-2026-11-27-n300k": dict(
        doc="cpu-runs/2026-11-27-memory/README.md",
        source="cpu-runs/2026-11-27-memory/memory-n300k.log", kind="memory"),
    "memory-2026-11-27-leak": dict(
        doc="cpu-runs/2026-11-27-memory/README.md",
        source="cpu-runs/2026-11-27-memory/memory-leak-check.log", kind="memory"),
    "memory-2026-11-27": dict(
        doc="performance.md", source="cpu-runs/2026-11-27-memory/memory.log", kind="memory"),
    "gpu-ops-run5": dict(
        doc="gpu-runs/2026-11-22-h200-run5/results.md", source="gpu-runs/2026-11-22-h200-run5/gpu_bench.md", kind="md",
        index=0),
    "waiting-costs-run5": dict(
        doc="semantics.md", source="gpu-runs/2026-11-22-h200-run5/gpu_bench.md", kind="md",
        index=1),
    "gpu-ops-sync-run5": dict(
        doc="gpu-runs/2026-11-22-h200-run5/results.md", source="gpu-runs/2026-11-22-h200-run5/gpu_bench.md", kind="md",
        index=1),
    "torch-run5": dict(
        doc="gpu-runs/2026-11-22-h200-run5/results.md", source="gpu-runs/2026-11-22-h200-run5/torch_bench.md", kind="md",
        index=0),
    "torch-sync-run5": dict(
        doc="gpu-runs/2026-11-22-h200-run5/results.md", source="gpu-runs/2026-11-22-h200-run5/torch_bench.md", kind="md",
        index=1),
    "any-dispatch-host-2026-11-25": dict(
        doc="cpu-runs/2026-11-25-any/README.md", source="cpu-runs/2026-11-25-any/any_dispatch.log", kind="paired"),
    "any-dispatch-host-runs-a-h": dict(
        doc="performance.md", source="cpu-runs/2026-11-25-any/any_dispatch-paired-ci.log",
        kind="paired_runs"),
    "any-dispatch-run15": dict(
        doc="gpu-runs/2026-11-25-2xh100-run15/results.md", source="gpu-runs/2026-11-25-2xh100-run15/any_dispatch.txt",
        kind="paired"),
    "any-dispatch-host-2026-11-27": dict(
        doc="performance.md", source="cpu-runs/2026-11-27-any/any_dispatch-paired.log",
        kind="paired_ci"),
    "any-dispatch-run17": dict(
        doc="performance.md", source="gpu-runs/2026-11-25-h100-run17/any_dispatch.txt",
        kind="paired_ci"),
    "reliability-2026-11-27": dict(
        doc="reliability.md", source="cpu-runs/2026-11-27-reliability/reliability.log",
        kind="reliability"),
    "stress-2026-11-25": dict(
        doc="reliability.md", source="cpu-runs/2026-11-25/fault_sweep_stress.log", kind="stress"),
    "conform-real-runtime-run2": dict(
        doc="cann-runs/2026-11-25/run2/README.md", source="cann-runs/2026-11-25/run2/conform-simulator.log",
        kind="conform", label="simulator",
        more=[("real runtime, before", "cann-runs/2026-11-25/run2/conform-real-runtime-before.log"),
              ("real runtime, after", "cann-runs/2026-11-25/run2/conform-real-runtime-after.log")]),
    "conform-real-runtime-round3": dict(
        doc="cann-runtime.md", source="cann-runs/2026-11-27-round3/conform-simulator.log",
        kind="conform", label="simulator (2 devices)",
        more=[("real runtime, before (2026-11-27 run2)", "cann-runs/2026-11-27/run2/conform-1.log"),
              ("real runtime, now (2 devices)", "cann-runs/2026-11-27-round3/conform-1.log")]),
    "conform-real-runtime-round4": dict(
        doc="cann-runs/2026-11-27-round4/README.md", source="cann-runs/2026-11-27-round3/conform-1.log",
        kind="conform", label="real runtime, round three",
        more=[("real runtime, round four", "cann-runs/2026-11-27-round4/conform-1.log")]),
    "conform-real-runtime-vmm": dict(
        doc="cann-runs/2026-11-27-vmm/README.md", source="cann-runs/2026-11-27-round4/conform-1.log",
        kind="conform", label="real runtime, round four",
        more=[("real runtime, virtual memory answered (run 2)", "cann-runs/2026-11-27-vmm/run2/conform-1.log")]),
    "conform-real-runtime-ipc-events": dict(
        doc="cann-runs/2026-11-27-ipc-events/README.md",
        source="cann-runs/2026-11-27-ipc-events/conform-before.log",
        kind="conform", label="real runtime, emulation before (c352ce1)",
        more=[("real runtime, IPC events answered", "cann-runs/2026-11-27-ipc-events/conform-1.log")]),
    "run17-allocations": dict(
        doc="gpu-runs/2026-11-25-h100-run17/results.md", source="gpu-runs/2026-11-25-h100-run17/gpu_bench.md", kind="md",
        index=2),
    "run17-alloc-no-host-sync": dict(
        doc="gpu-runs/2026-11-25-h100-run17/results.md", source="gpu-runs/2026-11-25-h100-run17/gpu_bench.md", kind="md",
        index=6),
    "null-driver-hot-paths": dict(
        doc="hot-paths.md", source="cpu-runs/2026-11-27-hot-paths/before.log",
        kind="before_after", more=[("after", "cpu-runs/2026-11-27-hot-paths/after.log")]),
    "null-driver-counts": dict(
        doc="cpu-runs/2026-11-27-null-driver/README.md", source="cpu-runs/2026-11-27-null-driver/null_driver.log",
        kind="md", index=0),
    "hot-paths-across-runs": dict(
        doc="performance.md", source="gpu-runs/2026-11-22-h100-run2/gpu_bench.md",
        kind="across", index=0, cells=[4, 6],
        runs=[(f"{n}", f"gpu-runs/{d}/gpu_bench.md") for n, d in [
            ("2", "2026-11-22-h100-run2"), ("3", "2026-11-22-h100-run3"),
            ("4", "2026-11-22-h200-run4"), ("5", "2026-11-22-h200-run5"),
            ("7", "2026-11-23-h200-run7"), ("8", "2026-11-23-h200-run8"),
            ("9", "2026-11-23-h200-run9"), ("11", "2026-11-23-h200-run11"),
            ("12", "2026-11-23-h200-run12"), ("13", "2026-11-23-h200-run13"),
            ("15", "2026-11-25-2xh100-run15"), ("17", "2026-11-25-h100-run17"),
            ("19", "2026-11-27-2xh100-run19")]],
        ops=[("event record", "event record (idle stream)"),
             ("event query (complete)", "event query (complete)"),
             ("stream query (idle)", "stream query (idle)"),
             ("record on A + wait on B", "record on A + wait on B"),
             ("host callback enqueue", "host callback enqueue (empty)"),
             ("launch + synchronize", "kernel launch + synchronize"),
             ("module launch, empty kernel", "module launch: empty kernel")]),
    "runs-ledger": dict(
        doc="runs.md", source="gpu-runs", kind="ledger",
        roots=["gpu-runs", "cann-runs", "cpu-runs"]),
    "vmm-alloc-2026-11-27": dict(
        doc="cpu-runs/2026-11-27-vmm-alloc/README.md",
        source="cpu-runs/2026-11-27-vmm-alloc/expandable_alloc.log", kind="criterion",
        target_ns=1000, target="alloc + free pair ≤ 1 µs"),
    "null-driver-cpu": dict(
        doc="cpu-runs/2026-11-27-null-driver/README.md", source="cpu-runs/2026-11-27-null-driver/null_driver.log",
        kind="md", index=1),
}

MARK = re.compile(r"^<!-- table:([A-Za-z0-9_.-]+) (begin|end) -->$")


class RenderError(Exception):
    """A table that cannot be rendered from its source."""


def md_tables(text):
    """The markdown tables of `text`, each a list of its lines."""
    out, cur = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            cur.append(line.rstrip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def render_md(spec, text):
    tables = md_tables(text)
    i = spec.get("index", 0)
    if i >= len(tables):
        raise RenderError(f"{spec['source']} holds {len(tables)} tables, not a table {i}")
    t = tables[i]
    rows = spec.get("rows")
    if rows:
        body = [r for r in t[2:] if any(r.split("|")[1].strip().startswith(p) for p in rows)]
        if len(body) != len(rows):
            raise RenderError(f"{spec['source']}: {len(body)} rows match {rows}")
        t = t[:2] + body
    return t


# `memory {backend:<14} {what:<26} n=...` (benches/benches/memory.rs): the backend is the first
# 14 characters after "memory " ("ascend-sim raw" fills them, so no double space follows).
MEMORY_LINE = re.compile(
    r"^memory (?P<backend>.{14}) (?P<what>.+?)\s+n=\d+ rss_before=(?P<before>[\d.]+) MiB "
    r"rss_after=(?P<after>[\d.]+) MiB delta=(?P<delta>[+-][\d.]+) KiB \([\d.]+ s, "
    r"(?P<ns>\d+) ns/pair\) flat_within_1MiB=(?P<flat>yes|NO)$"
)


def render_memory(spec, text):
    t = [
        "| backend | what | RSS before | RSS after | delta | ns/pair | flat within 1 MiB? |",
        "|---|---|---|---|---|---|---|",
    ]
    for line in text.splitlines():
        m = MEMORY_LINE.match(line.strip())
        if m:
            d = m.groupdict()
            t.append(
                f"| {d['backend'].strip()} | {d['what'].strip()} | {d['before']} MiB | "
                f"{d['after']} MiB | {d['delta']} KiB | {d['ns']} | "
                f"{'yes' if d['flat'] == 'yes' else 'NO'} |"
            )
    if len(t) == 2:
        raise RenderError(f"{spec['source']} holds no `memory ...` result line")
    return t


# `paired <backend> <operation> generic= X ns erased= Y ns overhead= Z ns (...)`
# (benches/benches/any_dispatch.rs): the IQR form of the first method, or the 95% CI form
# with a verdict against the 2 ns bound.
PAIRED_LINE = re.compile(
    r"^paired (?P<backend>\S+)\s+(?P<op>.+?)\s+generic=\s*(?P<gen>[-\d.]+) ns "
    r"erased=\s*(?P<era>[-\d.]+) ns overhead=\s*(?P<ovh>[-+\d.]+) ns "
    r"\((?:IQR (?P<iqr>[-+\d.]+\.\.[-+\d.]+)|95% CI (?P<ci>[-+\d.]+\.\.[-+\d.]+);[^)]*)\)"
    r"(?: target <= 2 ns: (?P<verdict>[A-Za-z]+))?"
)


def paired_rows(spec, text):
    rows = [m.groupdict() for m in map(PAIRED_LINE.match, text.splitlines()) if m]
    if not rows:
        raise RenderError(f"{spec['source']} holds no `paired ...` result line")
    return rows


def render_paired(spec, text):
    """Generic against erased, one row per operation (and backend), the IQR form."""
    t = ["| operation | generic | erased | paired overhead (median, IQR) |", "|---|---|---|---|"]
    for r in paired_rows(spec, text):
        if r["iqr"] is None:
            raise RenderError(f"{spec['source']}: a paired line without its IQR")
        t.append(f"| {r['backend']}: {r['op']} | {r['gen']} ns | {r['era']} ns | "
                 f"{r['ovh']} ns ({r['iqr']}) |")
    return t


def render_paired_ci(spec, text):
    """The 95% CI form: one row per operation, one column per backend, with the verdict."""
    rows = paired_rows(spec, text)
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    ops = list(dict.fromkeys(r["op"] for r in rows))
    cell = {(r["backend"], r["op"]): r for r in rows}
    t = ["| operation | " + " | ".join(backends) + " |", "|---" * (len(backends) + 1) + "|"]
    for op in ops:
        cells = []
        for b in backends:
            r = cell.get((b, op))
            if r is None:
                cells.append("–")
            elif r["ci"] is None:
                raise RenderError(f"{spec['source']}: a paired line without its 95% CI")
            else:
                cells.append(f"{r['ovh']} ns ({r['ci']}): {r['verdict'] or '–'}")
        t.append(f"| {op} | " + " | ".join(cells) + " |")
    return t


RUN_HEADER = re.compile(r"^## runs? ([A-Z](?:(?:, | and )[A-Z])*)\b", re.M)


def render_paired_runs(spec, text):
    """Several runs of the 95% CI form in one log, each under a `## run X (...)` header (or
    `## runs X and Y`, whose k-th line of an operation is run Y's when k = 2): one row per
    operation, one column per run, each cell the overhead, its interval and the verdict."""
    heads = list(RUN_HEADER.finditer(text))
    if not heads:
        raise RenderError(f"{spec['source']} holds no `## run X` header")
    cols, cell = [], {}
    for i, h in enumerate(heads):
        labels = re.findall(r"[A-Z]", h.group(1))
        body = text[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        seen = {}
        for r in paired_rows(dict(spec, source=f"{spec['source']} run {h.group(1)}"), body):
            k = seen.get(r["op"], 0)
            seen[r["op"]] = k + 1
            if k >= len(labels):
                raise RenderError(f"{spec['source']}: run {h.group(1)} repeats {r['op']}")
            if r["ci"] is None:
                raise RenderError(f"{spec['source']}: a paired line without its 95% CI")
            cell[(labels[k], r["op"])] = f"{r['ovh']} ({r['ci']}) {r['verdict'] or '–'}"
        cols += labels
    ops = list(dict.fromkeys(op for _, op in cell))
    t = ["| operation | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for op in ops:
        t.append(f"| {op} | " + " | ".join(cell.get((c, op), "–") for c in cols) + " |")
    return t


# `<backend>: 8 threads x N ops = T ops; streams S, events E, callbacks a/b, notifies c/d,
# data checks D, violations V` (tests/tests/stress.rs); "ascend" is the simulator's run.
STRESS_LINE = re.compile(
    r"(?P<backend>host|ascend): (?P<threads>\d+) threads x (?P<n>\d+) ops = (?P<ops>\d+) ops; "
    r"streams (?P<streams>\d+), events (?P<events>\d+), callbacks (?P<cb>\d+/\d+), "
    r"notifies (?P<nt>\d+/\d+), data checks (?P<data>\d+), violations (?P<viol>\d+)"
)


def render_stress(spec, text):
    t = [
        "| run | ops | streams created | events | callbacks (ran / enqueued) | notifies (ran / enqueued) | "
        "data checks | violations |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in STRESS_LINE.finditer(text):
        d = m.groupdict()
        who = "simulator" if d["backend"] == "ascend" else d["backend"]
        t.append(f"| {who}, {d['threads']} × {int(d['n']):,} | {int(d['ops']):,} | "
                 f"{int(d['streams']):,} | {int(d['events']):,} | {d['cb']} | {d['nt']} | "
                 f"{int(d['data']):,} | {d['viol']} |")
    if len(t) == 2:
        raise RenderError(f"{spec['source']} holds no stress result line")
    return t


CONFORM_LINE = re.compile(r"(?:^|\.\.\. )(PASS|FAIL|SKIP) (\S+)\s")
# The CLI's summary line, or the test harness's `Summary { passed: P, failed: F, skipped: S, .. }`.
CONFORM_SUMMARY = re.compile(
    r"^(\d+) passed, (\d+) failed, (\d+) skipped\b|"
    r"Summary \{ passed: (\d+), failed: (\d+), skipped: (\d+)", re.M)


def render_tsv(spec, text):
    """A step summary (`step<TAB>verdict<TAB>seconds<TAB>detail` lines, as scripts/gpu/run*.sh
    write them; with `cols=3`, `step<TAB>exit status<TAB>end of its log` lines), optionally only
    the steps whose name starts with one of `rows`."""
    three = spec.get("cols") == 3
    out = (["| step | exit status | end of its log |", "|---|---|---|"] if three
           else ["| step | verdict | s | detail |", "|---|---|---|---|"])
    rows = spec.get("rows")
    for line in text.splitlines():
        cells = line.split("\t")
        if three and len(cells) == 3:
            if rows and not any(cells[0].startswith(p) for p in rows):
                continue
            tail = cells[2].strip().replace("|", "\\|")
            out.append(f"| {cells[0]} | {cells[1]} | {tail} |")
            continue
        if len(cells) != 4:
            continue
        if rows and not any(cells[0].startswith(p) for p in rows):
            continue
        detail = cells[3].strip().replace("|", "\\|")
        out.append(f"| {cells[0]} | {cells[1]} | {cells[2]} | {detail} |")
    if len(out) == 2:
        raise RenderError(f"{spec['source']}: no step line matches {rows}")
    return out


RELIABILITY_STEP = re.compile(r"^(PASS|FAIL|SKIP) (.+?) \((\d+)s(?:, exit status (\d+))?\)$")
RELIABILITY_SUMMARY = re.compile(r"^reliability: (\d+) passed, (\d+) failed, (\d+) skipped")
VALGRIND_SUMMARY = re.compile(r"^valgrind: (\d+) binaries, (\d+) clean, (\d+) failed")


def render_lines(spec, text):
    """The lines of `source` matching `match` (a regular expression searched in each line),
    verbatim, in a code block."""
    pat = re.compile(spec["match"])
    got = [line for line in text.splitlines() if pat.search(line)]
    if not got:
        raise RenderError(f"{spec['source']}: no line matches {spec['match']!r}")
    return ["```"] + got + ["```"]


def render_reliability(spec, text):
    """scripts/reliability.sh's steps (`PASS|FAIL|SKIP name (Ns[, exit status N])` lines), its
    valgrind count and its summary line."""
    t = ["| step | verdict | s |", "|---|---|---|"]
    for line in text.splitlines():
        m = RELIABILITY_STEP.match(line.strip())
        if m:
            verdict = m.group(1) + (f" (exit status {m.group(4)})" if m.group(4) else "")
            t.append(f"| {m.group(2)} | {verdict} | {m.group(3)} |")
    if len(t) == 2:
        raise RenderError(f"{spec['source']} holds no reliability step line")
    for line in text.splitlines():
        m = VALGRIND_SUMMARY.match(line.strip())
        if m:
            t.append(f"| (valgrind binaries) | {m.group(2)} of {m.group(1)} clean, "
                     f"{m.group(3)} failed | |")
    summ = [m for m in map(RELIABILITY_SUMMARY.match, text.splitlines()) if m]
    if not summ:
        raise RenderError(f"{spec['source']} holds no `reliability:` summary line")
    m = summ[-1]
    t.append(f"| (summary) | {m.group(1)} passed, {m.group(2)} failed, {m.group(3)} skipped | |")
    return t


def render_conform(spec, text):
    """One row per check, one column per log (`xstream conform` lines), then the summary."""
    cols = [(spec["label"], text)] + [
        (label, open(os.path.join(DOCS, path), encoding="utf-8").read())
        for label, path in spec["more"]
    ]
    results = []
    for label, body in cols:
        found = {}
        for line in body.splitlines():
            m = CONFORM_LINE.search(line)
            if m:
                found.setdefault(m.group(2), m.group(1))
        summary = [m for m in CONFORM_SUMMARY.finditer(body)]
        if not found or not summary:
            raise RenderError(f"{label}: no `xstream conform` result lines and summary")
        n = [g for g in summary[0].groups() if g is not None]
        results.append((found, f"{n[0]} passed, {n[1]} failed, {n[2]} skipped"))
    checks = list(dict.fromkeys(c for found, _ in results for c in found))
    t = ["| check | " + " | ".join(label for label, _ in cols) + " |",
         "|---" * (len(cols) + 1) + "|"]
    for c in checks:
        t.append(f"| {c} | " + " | ".join(found.get(c, "–") for found, _ in results) + " |")
    t.append("| (summary) | " + " | ".join(summ for _, summ in results) + " |")
    return t


def render_across(spec, text):
    """One row per run (`runs`: label and file), one column per operation (`ops`: heading and
    first-cell prefix of a row of the `index`-th table each run wrote), each cell that row's
    `cells` columns joined by ", " (– where the run lacks the row)."""
    del text  # the runs' files are read below, `source` among them
    t = ["| run | " + " | ".join(h for h, _ in spec["ops"]) + " |",
         "|---" * (len(spec["ops"]) + 1) + "|"]
    hit = set()
    for label, path in spec["runs"]:
        tables = md_tables(open(os.path.join(DOCS, path), encoding="utf-8").read())
        i = spec.get("index", 0)
        if i >= len(tables):
            raise RenderError(f"{path} holds {len(tables)} tables, not a table {i}")
        row = []
        for _, prefix in spec["ops"]:
            cell = "–"
            for r in tables[i][2:]:
                cells = [c.strip() for c in r.strip("|").split("|")]
                if cells[0].startswith(prefix):
                    cell = ", ".join(cells[c] for c in spec["cells"] if c < len(cells))
                    hit.add(prefix)
                    break
            row.append(cell)
        t.append(f"| {label} | " + " | ".join(row) + " |")
    missing = [p for _, p in spec["ops"] if p not in hit]
    if missing:
        raise RenderError(f"no run holds a row {missing}")
    return t


VERDICT = re.compile(r"^(PASS|FAIL|FAILED|SKIP)\b")


def folder_steps(path):
    """PASS / FAIL / SKIP counts of a run folder's step summaries (summary.txt lines that start
    with a verdict, the verdict column of *summary.tsv), or "–" when it has none."""
    counts, seen = {}, []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name == "summary.txt":
            verdicts = [VERDICT.match(line) for line in open(full, encoding="utf-8")]
        elif name.endswith("summary.tsv"):
            verdicts = [VERDICT.match(line.split("\t")[1])
                        for line in open(full, encoding="utf-8") if line.count("\t") >= 3]
        else:
            continue
        seen.append(name)
        for m in verdicts:
            if m:
                v = "FAIL" if m.group(1).startswith("FAIL") else m.group(1)
                counts[v] = counts.get(v, 0) + 1
    if not seen:
        return "–"
    body = ", ".join(f"{counts[v]} {v}" for v in ("PASS", "FAIL", "SKIP") if v in counts)
    return f"{body or 'no verdict line'} (`{'`, `'.join(seen)}`)"


def folder_title(path):
    """The first heading of the folder's README.md, else "–"."""
    full = os.path.join(path, "README.md")
    if os.path.exists(full):
        for line in open(full, encoding="utf-8"):
            if line.startswith("#"):
                return line.lstrip("#").strip().replace("|", "\\|")
    return "–"


def run_folders(root):
    """The run folders under docs/`root`: each dated folder, and its sub-folders that hold
    logs of a run of their own (a README.md, a machine.txt or an xstream-commit.txt)."""
    def natural(name):
        return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]

    out = []
    for name in sorted(os.listdir(os.path.join(DOCS, root)), key=natural):
        rel = f"{root}/{name}"
        if not os.path.isdir(os.path.join(DOCS, rel)):
            continue
        out.append(rel)
        for sub in sorted(os.listdir(os.path.join(DOCS, rel)), key=natural):
            srel = f"{rel}/{sub}"
            if os.path.isdir(os.path.join(DOCS, srel)) and any(
                    os.path.exists(os.path.join(DOCS, srel, f))
                    for f in ("README.md", "machine.txt", "xstream-commit.txt")):
                out.append(srel)
    return out


def render_ledger(spec, text):
    """One row per run folder under `roots`: date, device, commit (as in the captions), the
    step verdicts it recorded, and its README's title."""
    del text
    t = ["| run folder | date | device | commit | steps recorded | what it is |",
         "|---|---|---|---|---|---|"]
    for root in spec["roots"]:
        for rel in run_folders(root):
            path = os.path.join(DOCS, rel)
            files = sorted(f for f in os.listdir(path) if os.path.isfile(os.path.join(path, f)))
            if not files:
                continue
            _, date, device, commit = run_facts(f"{rel}/{files[0]}")
            link = os.path.relpath(path, os.path.dirname(os.path.join(DOCS, spec["doc"])))
            t.append(f"| [`{rel}`]({link}/) | {date} | {device} | {commit} | "
                     f"{folder_steps(path)} | {folder_title(path)} |")
    if len(t) == 2:
        raise RenderError(f"no run folder under {spec['roots']}")
    return t


def cpu_rows(text, col):
    """`label -> [value, ...]` of column `col` (4: xstream - raw ns, 5: xstream - blocked -
    raw ns) over every null-driver CPU table of `text` (one value per run the log holds), with
    the labels in first-seen order."""
    out = {}
    for t in md_tables(text):
        if not t[0].startswith("| operation | xstream ns |"):
            continue
        for r in t[2:]:
            cells = [c.strip() for c in r.strip().strip("|").split("|")]
            out.setdefault(cells[0], []).append(int(cells[col]))
    return out


def render_before_after(spec, text):
    """backends/cuda/tests/null_driver.rs CPU tables: per row, xstream - raw ns and xstream -
    blocked - raw ns in the runs of `source` (before) and of the `more` log (after): median of
    the runs (min to max), and the change of the median."""
    after_text = open(os.path.join(DOCS, spec["more"][0][1]), encoding="utf-8").read()
    cols = [(cpu_rows(text, c), cpu_rows(after_text, c)) for c in (4, 5)]
    if not cols[0][0] or not cols[0][1]:
        raise RenderError(f"{spec['source']}: no null-driver CPU table before or after")
    med = lambda v: sorted(v)[len(v) // 2]
    span = lambda v: f"{med(v):+d} ({min(v):+d} to {max(v):+d})"
    runs = len(next(iter(cols[0][0].values())))
    t = [f"| operation | xstream − raw: before | after | change | xstream − blocked − raw: before "
         f"| after | change |", "|---|---:|---:|---:|---:|---:|---:|"]
    for label in cols[0][0]:
        cells = []
        for before, after in cols:
            b, a = before[label], after.get(label)
            if a is None:
                raise RenderError(f"{spec['more'][0][1]}: no row {label!r}")
            cells += [span(b), span(a), f"{med(a) - med(b):+d}"]
        t.append(f"| {label} | " + " | ".join(cells) + " |")
    t.append(f"| (runs per side) | {runs} | {len(next(iter(cols[0][1].values())))} | | | | |")
    return t


# criterion's plain output: the benchmark's id on a line, then `time: [low estimate high]`.
CRITERION = re.compile(
    r"^(?P<id>\S[^\n]*?)\n\s+time:\s+\[(?P<lo>[\d.]+) (?P<lou>\S+) (?P<mid>[\d.]+) (?P<midu>\S+) "
    r"(?P<hi>[\d.]+) (?P<hiu>\S+)\]", re.M)
UNITS_NS = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}


def render_criterion(spec, text):
    """A criterion bench's log: per benchmark, its estimate and interval as criterion printed
    them, and the target of `spec` (`target_ns`) met or not by the estimate."""
    t = [f"| benchmark | time (criterion: estimate [low, high]) | {spec['target']} |",
         "|---|---:|---|"]
    for m in CRITERION.finditer(text):
        unit = m.group("midu")
        if unit not in UNITS_NS:
            raise RenderError(f"{spec['source']}: unknown unit {unit!r}")
        ns = float(m.group("mid")) * UNITS_NS[unit]
        verdict = "met" if ns <= spec["target_ns"] else "not met"
        t.append(f"| {m.group('id').strip()} | {m.group('mid')} {unit} [{m.group('lo')} "
                 f"{m.group('lou')}, {m.group('hi')} {m.group('hiu')}] | {verdict} |")
    if len(t) == 2:
        raise RenderError(f"{spec['source']}: no criterion result")
    return t


def render_diag(spec, text):
    """`diag: <way>: <result>` lines (benches/src/bin/gpu_ipc/diag.rs) as a table."""
    t = ["| copy (raw driver, in the importing process) | result |", "|---|---|"]
    for line in text.splitlines():
        m = re.match(r"^diag: ([^:]+): (.*)$", line.strip())
        if m:
            t.append(f"| {m.group(1)} | {m.group(2)} |")
    if len(t) == 2:
        raise RenderError(f"{spec['source']} holds no `diag:` line")
    return t


def caption(spec):
    """The caption of a table: the files it was rendered from and, for each run folder among
    them, the folder, date, device and commit (`run_facts`)."""
    srcs = [spec["source"]] + [p for _, p in spec.get("more", [])]
    srcs += [p for _, p in spec.get("runs", [])]
    runs = list(dict.fromkeys(srcs))
    if spec["kind"] == "ledger":
        return ("_Rendered by `scripts/render-tables.py` from the run folders under "
                + ", ".join(f"`docs/{r}/`" for r in spec["roots"])
                + " (each row read from its folder, as the captions of the tables are); "
                "do not edit by hand._")
    files = ", ".join(f"`docs/{p}`" for p in runs)
    names = {os.path.basename(p) for p in runs}
    if len(runs) > 2 and len(names) == 1:
        files = f"`{names.pop()}` of each run folder below"
    facts = list(dict.fromkeys(run_facts(p) for p in runs))
    if len(facts) == 1:
        run, date, device, commit = facts[0]
        return (f"_Rendered by `scripts/render-tables.py` from {files} (run folder "
                f"`{run}`, {date}, {device}, {commit}); do not edit by hand._")
    each = "; ".join(f"`{run}`: {date}, {device}, {commit}" for run, date, device, commit in facts)
    return (f"_Rendered by `scripts/render-tables.py` from {files} (run folders {each}); "
            "do not edit by hand._")


def run_facts(src):
    """Run folder, date, device, commit of the file `src` (relative to docs/): each read
    from the run's folder.

    Date: the folder name's YYYY-MM-DD. Device: the GPU name under nvidia-smi's header in
    machine.txt, else its `cpu:` line, else its architecture and CPU count lines, else a CPU
    count in the source's first lines. Commit: a `commit:` line of machine.txt, else "commit X"
    in the source's first lines, else "main at X" in the folder's README.md, else it says the
    folder does not record one. Nothing is read from git, so a shallow clone renders the same."""
    folder = os.path.dirname(src)
    run = folder.split("/")[1] if folder.count("/") >= 1 else folder
    run_dir = os.path.join(DOCS, *folder.split("/")[:2])
    date = re.match(r"\d{4}-\d{2}-\d{2}", run)
    date = date.group(0) if date else "date not recorded"
    machine = ""
    mpath = os.path.join(run_dir, "machine.txt")
    if os.path.exists(mpath):
        machine = open(mpath, encoding="utf-8").read()
    mlines = machine.splitlines()
    device = "device not recorded"
    commit = ""
    for i, line in enumerate(mlines):
        if line.startswith("name, driver_version") and i + 1 < len(mlines):
            # nvidia-smi's CSV: one line per GPU after the header
            device = mlines[i + 1].split(",")[0].strip()
            n = 0
            while i + 1 + n < len(mlines) and mlines[i + 1 + n].startswith(device + ","):
                n += 1
            device = f"{n} × {device}" if n > 1 else device
            break
        if line.startswith("cpu: "):
            device = line[5:].strip()
            break
        # nvidia-smi --query-gpu=name,driver_version,... --format=csv,noheader
        m = re.match(r"^([^,]+), (\d+\.\d+(?:\.\d+)?)(?:, \d+ MiB)?$", line)
        if m:
            n = sum(1 for x in mlines if re.match(r"^GPU \d+: ", x))
            device = f"{n} × {m.group(1).strip()}" if n > 1 else m.group(1).strip()
            break
    else:
        if len(mlines) >= 3 and mlines[2].strip().isdigit():
            device = f"{mlines[1].strip()}, {mlines[2].strip()} CPUs"
    for line in mlines:
        if line.startswith("commit: "):
            commit = "commit " + line[8:].strip()[:7]
    head = "\n".join(open(os.path.join(DOCS, src), encoding="utf-8").read().splitlines()[:5])
    m = re.search(r"\bcommit ([0-9a-f]{7,40})( \+ uncommitted [^,;]+)?", head)
    if not commit and m:
        commit = "commit " + m.group(1)[:7] + (m.group(2) or "")
    m = re.search(r"\b(\d+) CPUs\b", head)
    if device == "device not recorded" and m:
        device = f"{m.group(1)} CPUs, no accelerator" if "no accelerator" in head else f"{m.group(1)} CPUs"
    own = os.path.join(DOCS, folder, "xstream-commit.txt")
    if not commit and os.path.exists(own):
        commit = "commit " + open(own, encoding="utf-8").read().strip()[:7]
    readme = os.path.join(DOCS, folder, "README.md")
    if not os.path.exists(readme):
        readme = os.path.join(run_dir, "README.md")
    if device == "device not recorded" and os.path.exists(readme):
        # "Machine: the 2-core CPU machine (x86-64, ..., no NPU), ..." -> up to the bracket
        m = re.search(r"^Machine: ([^(,.]+)", open(readme, encoding="utf-8").read(), re.M)
        if m:
            device = m.group(1).strip().strip("`")
    if not commit and os.path.exists(readme):
        m = re.search(r"main at `?([0-9a-f]{7,40})", open(readme, encoding="utf-8").read())
        if m:
            commit = "commit " + m.group(1)[:7]
    if not commit:
        commit = "commit not recorded in the run folder"
    return run, date, device, commit


def render(name):
    spec = TABLES[name]
    path = os.path.join(DOCS, spec["source"])
    if spec["kind"] == "ledger":
        path = os.path.join(DOCS, spec["roots"][0])
        return [caption(spec), ""] + render_ledger(spec, "")
    if not os.path.exists(path):
        raise RenderError(f"table {name}: source docs/{spec['source']} is missing")
    text = open(path, encoding="utf-8").read()
    kinds = {
        "md": render_md,
        "memory": render_memory,
        "paired": render_paired,
        "paired_ci": render_paired_ci,
        "paired_runs": render_paired_runs,
        "stress": render_stress,
        "conform": render_conform,
        "tsv": render_tsv,
        "lines": render_lines,
        "reliability": render_reliability,
        "across": render_across,
        "ledger": render_ledger,
        "before_after": render_before_after,
        "diag": render_diag,
        "criterion": render_criterion,
    }
    table = kinds[spec["kind"]](spec, text)
    return [caption(spec), ""] + table


def rewrite(doc, text):
    """`text` with each marked table re-rendered; the names found."""
    out, found, lines = [], [], text.split("\n")
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        name, which = m.groups()
        if which != "begin":
            raise RenderError(f"docs/{doc}:{i + 1}: end marker of {name} without a begin")
        if name not in TABLES:
            raise RenderError(f"docs/{doc}:{i + 1}: table {name} has no entry in TABLES")
        if TABLES[name]["doc"] != doc:
            raise RenderError(f"docs/{doc}: table {name} belongs to docs/{TABLES[name]['doc']}")
        j = i + 1
        while j < len(lines) and lines[j] != f"<!-- table:{name} end -->":
            if MARK.match(lines[j]):
                raise RenderError(f"docs/{doc}:{j + 1}: marker inside table {name}")
            j += 1
        if j == len(lines):
            raise RenderError(f"docs/{doc}:{i + 1}: table {name} has no end marker")
        out.append(lines[i])
        out.extend(render(name))
        out.append(lines[j])
        found.append(name)
        i = j + 1
    return "\n".join(out), found


def main(argv):
    check = "--check" in argv[1:]
    unknown = [a for a in argv[1:] if a != "--check"]
    if unknown:
        print(f"usage: {argv[0]} [--check]", file=sys.stderr)
        return 2
    docs = sorted({s["doc"] for s in TABLES.values()})
    seen, changed = [], 0
    try:
        for doc in docs:
            path = os.path.join(DOCS, doc)
            old = open(path, encoding="utf-8").read()
            new, found = rewrite(doc, old)
            dup = {n for n in found if found.count(n) > 1}
            if dup:
                raise RenderError(f"docs/{doc}: tables marked twice: {sorted(dup)}")
            seen += found
            if new == old:
                continue
            changed += 1
            if check:
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True),
                    f"docs/{doc} (committed)", f"docs/{doc} (rendered from the logs)"))
            else:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
        missing = sorted(set(TABLES) - set(seen))
        if missing:
            raise RenderError(f"tables without markers in their doc: {missing}")
    except RenderError as e:
        print(f"FAIL: render-tables: {e}")
        return 2
    if check and changed:
        print(f"FAIL: render-tables: {changed} doc(s) differ from the render of their logs "
              "(run scripts/render-tables.py and commit)")
        return 1
    verb = "match their logs" if check else ("rewritten" if changed else "already matched")
    print(f"PASS: render-tables: {len(seen)} tables in {len(docs)} doc(s) {verb}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
