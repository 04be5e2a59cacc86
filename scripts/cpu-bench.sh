#!/usr/bin/env bash
# Regenerates the CPU-side tables of docs/performance.md: the Ascend-over-simulator criterion
# table, the paired A/B runs, the host table, the hot-path allocation counts and the 100k
# create/drop memory table. Raw logs go to docs/cpu-runs/<UTC date>/ (with machine.txt and the
# tables as tables.md); the tables are printed at the end.
# Usage: scripts/cpu-bench.sh [PAIRED_RUNS]   (default 3: the paired A/B part runs once inside
# the criterion run and PAIRED_RUNS - 1 more times alone). About 3 minutes on 2 cores once built.
#        scripts/cpu-bench.sh --tables DIR    (only print the tables of the logs in DIR again)
# Method: criterion with the settings of `xstream_benches::short_group` (20 samples, 300 ms
# warm-up, 1 s measurement per benchmark); tables give criterion's median.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
tables() { # DIR: the tables of the logs in DIR, in Markdown
    python3 - "$1" <<'EOF'
import re, sys, glob, os
d = sys.argv[1]
UNIT = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}

def fmt(ns):
    if ns >= 1e6: return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3: return f"{ns / 1e3:.2f} µs"
    return f"{ns:.1f} ns"

def criterion(path):
    text = open(path, encoding="utf-8").read()
    res, last = {}, None
    for line in text.splitlines():
        m = re.match(r"^(\S+/\S+)", line)
        if m and not line.startswith("Benchmarking"):
            last = m.group(1)
        t = re.search(r"time:\s+\[(\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\]", line)
        if t and last:
            res[last] = float(t.group(3)) * UNIT[t.group(4)]
    return res

OPS = [
    ("stream_create_destroy", "stream create + destroy"),
    ("pooled_stream_get", "pooled stream acquire (`StreamPool::get`)"),
    ("event_create_destroy", "event create + destroy"),
    ("event_record", "event record"),
    ("stream_query_idle", "stream query (idle)"),
    ("event_query_complete", "event query (complete)"),
    ("record_and_wait", "record + stream wait on event"),
    ("synchronize_idle", "synchronize (idle stream)"),
    ("host_callback_enqueue", "host callback enqueue"),
    ("host_callback_round_trip", "callback round trip"),
    ("future_completion", "future completion (`Stream::completed().wait()`)"),
]
date = os.path.basename(d)
a = criterion(f"{d}/ascend_sim.log")
print(f"### Ascend backend over the simulator: criterion medians ({date}, docs/cpu-runs/{date}/ascend_sim.log)\n")
print("| operation | xstream | raw | overhead | ratio |")
print("|---|---|---|---|---|")
for k, name in OPS:
    x, r = a.get(f"ascend_sim/xstream/{k}"), a.get(f"ascend_sim/raw/{k}")
    if x is None:
        continue
    if r is None:
        print(f"| {name} | {fmt(x)} | n/a | – | – |")
    else:
        print(f"| {name} | {fmt(x)} | {fmt(r)} | {x - r:+.0f} ns | {x / r:.2f} |")

runs = [f"{d}/ascend_sim.log"] + sorted(glob.glob(f"{d}/ascend_sim_paired_*.log"))
paired = []
for p in runs:
    row = {}
    for m in re.finditer(r"^paired (.+?)\s+xstream=\s*(\S+) ns raw=\s*(\S+) ns overhead=\s*(\S+) ns \(IQR (\S+)\.\.(\S+)\)", open(p, encoding="utf-8").read(), re.M):
        row[m.group(1)] = (float(m.group(4)), m.group(5), m.group(6), float(m.group(3)))
    paired.append(row)
print(f"\n### Paired A/B on the simulator ({date}): median of per-round differences, ns per call\n")
print("| operation | " + " | ".join(f"run {i + 1}" for i in range(len(paired))) + " | raw call |")
print("|---|" + "---|" * len(paired) + "---|")
for op in paired[0] if paired else []:
    cells = [f"{r[op][0]:+.1f} (IQR {r[op][1]}..{r[op][2]})" if op in r else "–" for r in paired]
    print(f"| {op} | " + " | ".join(cells) + f" | {paired[0][op][3]:.0f} ns |")

h = criterion(f"{d}/host_ops.log")
print(f"\n### Host backend: criterion medians ({date}, docs/cpu-runs/{date}/host_ops.log)\n")
print("| operation | xstream |")
print("|---|---|")
for k, name in OPS:
    if f"host/{k}" in h:
        print(f"| {name} | {fmt(h[f'host/{k}'])} |")

print(f"\n### Allocations per 1000 calls ({date}, docs/cpu-runs/{date}/no_alloc.log)\n")
print("| backend | operation | xstream | raw |")
print("|---|---|---|---|")
for m in re.finditer(r"allocs (\S+)\s+(.+?)\s+xstream=\s*(\d+) raw=\s*(\S+)", open(f"{d}/no_alloc.log", encoding="utf-8").read(), re.M):
    print(f"| {m.group(1)} | {m.group(2)} | {m.group(3)} | {m.group(4)} |")

print(f"\n### Memory: 100k create/drop ({date}, docs/cpu-runs/{date}/memory.log)\n")
print("| backend | what | RSS before | RSS after | delta | ns/pair | flat within 1 MiB? |")
print("|---|---|---|---|---|---|---|")
for m in re.finditer(r"^memory (.{14}) (.+?)\s+n=\d+ rss_before=(\S+) MiB rss_after=(\S+) MiB delta=(\S+) KiB \((\S+) s, (\S+) ns/pair\) flat_within_1MiB=(\S+)", open(f"{d}/memory.log", encoding="utf-8").read(), re.M):
    print(f"| {m.group(1).strip()} | {m.group(2)} | {m.group(3)} MiB | {m.group(4)} MiB | {m.group(5)} KiB | {m.group(7)} | {m.group(8)} |")
EOF
}
if [ "${1:-}" = "--tables" ]; then
    tables "${2:?usage: scripts/cpu-bench.sh --tables DIR}"
    exit 0
fi
paired_runs="${1:-3}"
out="${CPU_BENCH_OUT:-docs/cpu-runs/$(date -u +%F)}"
mkdir -p "$out"

{
    echo "date: $(date -u '+%F %T UTC')"
    echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)')"
    echo "kernel: $(uname -srm)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) online CPUs"
    echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "rustc: $(rustc --version)"
} >"$out/machine.txt"
cat "$out/machine.txt"

# Build first (the simulator in release, so that both sides call an optimised one).
cargo build --release -p xstream-ascend-sim
cargo bench -p xstream-benches --no-run
export XSTREAM_ACL_LIBRARY="$PWD/target/release/libascendcl.so"

echo "== host_ops"
cargo bench -p xstream-benches --bench host_ops 2>&1 | tee "$out/host_ops.log"
echo "== ascend_sim (criterion + paired run 1)"
cargo bench -p xstream-benches --bench ascend_sim 2>&1 | tee "$out/ascend_sim.log"
for i in $(seq 2 "$paired_runs"); do
    echo "== ascend_sim paired run $i (the filter NONE skips the criterion part)"
    cargo bench -p xstream-benches --bench ascend_sim -- NONE 2>&1 | tee "$out/ascend_sim_paired_$i.log"
done
echo "== memory (100k create/drop)"
# The bench exits 1 when a case grows by more than 1 MiB: the other steps still run and the
# script exits 1 at the end.
mem_rc=0
cargo bench -p xstream-benches --bench memory 2>&1 | tee "$out/memory.log" || mem_rc=$?
echo "== allocation counts"
cargo test -p xstream-benches --test no_alloc -- --nocapture --test-threads=1 2>&1 | tee "$out/no_alloc.log"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
tables "$out" | tee "$out/tables.md"
if [ "$mem_rc" -ne 0 ]; then
    echo "FAIL: memory: a case grew by more than 1 MiB or the bench failed (exit $mem_rc; $out/memory.log)"
    exit 1
fi
