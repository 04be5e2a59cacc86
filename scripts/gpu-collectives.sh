#!/usr/bin/env bash
# gpu-collectives.sh: the collective bandwidth runs on a 2-GPU machine, xstream (NCCL) beside
# PyTorch's torch.distributed.all_reduce (the same NCCL library), all_reduce f32 sum, 8 B to
# 1 GiB, NVLink multicast off (NCCL_NVLS_ENABLE=0).
#
# Flow (fits scripts/gpu-bundle.sh / gpu-run.sh):
#   1. here:  FEATURES="cuda xstream-cuda/nccl" PICK='nccl' scripts/gpu-bundle.sh
#             (the bundle gets the release `xstream` CLI, built with NCCL support, and the NCCL
#             test executable; scripts/*.py are copied beside them)
#   2. there: the device `run` tool, kind nvidia-h200-x2, carry ["gpu-bundle"], command
#             bash scripts/gpu-collectives.sh
#      It prints the NCCL tests' summary, then three tables (xstream one process for both GPUs,
#      xstream one process per GPU, PyTorch with torchrun) and a side-by-side table; the same
#      goes to $OUT/collectives.md and the logs to $OUT/collectives.log.
#
# The device tool stops a command after 600 s: each step has its own timeout, and STEPS picks
# steps for separate calls (e.g. STEPS=tests, then STEPS="xs1 xs2 torch raw").
#
# Step raw: the bench bench/gpu_nccl (benches/benches/gpu_nccl.rs) runs xstream's all-reduce and
# raw ncclAllReduce in one process, interleaved, on every GPU (one rank each); its table goes to
# $OUT/nccl_bench.md. That is the like-for-like overhead check; torch adds its own layers.
# Env: STEPS (default "tests xs1 xs2 xs3 torch raw"), BACKEND (default cuda; host for a dry run of the
#      script anywhere), MAX (default 1G), ITERS (default 20), WARMUP (default 5), NCCL_LIB (a
#      libnccl.so* to use; default: the one PyTorch ships, else the system's), WORLD (ranks per
#      job: default 2, or 1 where nvidia-smi lists one GPU; a failing nvidia-smi -L is a FAIL).
# Verdicts: PASS / FAIL / SKIP per step; the two-rank side-by-side targets ("Targets ... NOT
# MET") and the raw step's targets fail the script when their steps ran; no NCCL test binary in
# the bundle is a SKIP line.
#
# One GPU (WORLD=1): xstream runs one rank in one process, the one-process-per-GPU step is
# skipped, torchrun starts one process, and the side-by-side table compares time and algorithm
# bandwidth (bus bandwidth is 0 by definition for one rank); only the 8 B latency target applies.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUNDLE="${BUNDLE:-$ROOT/gpu-bundle}"
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
LOG="$OUT/collectives.log"
MD="$OUT/collectives.md"
: >"$LOG"
STEPS=" ${STEPS:-tests xs1 xs2 xs3 torch raw} "
step() { [[ "$STEPS" == *" $1 "* ]]; }
MAX="${MAX:-1G}"; ITERS="${ITERS:-20}"; WARMUP="${WARMUP:-5}"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
XS="$BUNDLE/bin/xstream"
[ -x "$XS" ] || { echo "FATAL: $XS missing (run scripts/gpu-bundle.sh first)"; exit 1; }

# NCCL: cudarc opens `libnccl.so` (or libnccl.so.<CUDA major>, .12, ...), never `libnccl.so.2`,
# the only name PyTorch's wheel ships: link it as libnccl.so in a directory of our own.
if [ -z "${NCCL_LIB:-}" ]; then
    NCCL_LIB=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
for d in dirs:
    for p in sorted(glob.glob(os.path.join(d, "nvidia", "nccl", "lib", "libnccl.so*"))) + \
             sorted(glob.glob(os.path.join(d, "torch", "lib", "libnccl.so*"))):
        print(p); raise SystemExit
PY
)
fi
[ -n "${NCCL_LIB:-}" ] || NCCL_LIB=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so/ {print $NF; exit}')
if [ -n "${NCCL_LIB:-}" ]; then
    NDIR="$(mktemp -d)"
    ln -sf "$NCCL_LIB" "$NDIR/libnccl.so"
    export LD_LIBRARY_PATH="$NDIR:$LD_LIBRARY_PATH"
    echo "NCCL library: $NCCL_LIB (as $NDIR/libnccl.so)" | tee -a "$LOG"
else
    echo "NCCL library: none found (xstream's NCCL runs will report NotAvailable)" | tee -a "$LOG"
fi
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
    nvidia-smi topo -m >>"$LOG" 2>&1
fi

SUM=""
FAILED=0
note() { SUM+="$1"$'\n'; echo "$1"; }

# Ranks per job: WORLD, else 2 for the host dry run, else the GPUs `nvidia-smi -L` lists (2 at
# most). A failing or absent nvidia-smi on the CUDA backend is a FAIL, never a silent one rank.
WORLD="${WORLD:-}"
if [ -z "$WORLD" ] && [ "${BACKEND:-cuda}" != cuda ]; then
    WORLD=2
elif [ -z "$WORLD" ]; then
    if ! gl=$(nvidia-smi -L 2>&1); then
        note "FAIL gpu count: nvidia-smi -L failed ($(head -c 160 <<<"$gl" | tr '\n' ' ')); set WORLD to run anyway"
        echo "== SUMMARY"; printf '%s' "$SUM"; exit 1
    fi
    ngpu=$(grep -c '^GPU' <<<"$gl")
    if [ "$ngpu" -lt 1 ]; then
        note "FAIL gpu count: nvidia-smi -L listed no GPU; set WORLD to run anyway"
        echo "== SUMMARY"; printf '%s' "$SUM"; exit 1
    fi
    WORLD=$((ngpu < 2 ? ngpu : 2))
fi
echo "ranks per job: $WORLD" | tee -a "$LOG"
# status NAME RC: notes the step as PASS (rc 0) or FAIL (anything else; the script then exits 1).
status() { if [ "$2" -eq 0 ]; then note "PASS $1"; else note "FAIL $1: rc=$2"; FAILED=1; fi; }

# 1. Correctness: the NCCL tests (one process for both GPUs, one process per GPU, every op x dtype).
ntests=0
for t in "$BUNDLE"/bin/*nccl*; do
    [ -x "$t" ] && step tests || continue
    ntests=$((ntests + 1))
    echo "===== $(basename "$t")" >>"$LOG"
    timeout 240 "$t" --test-threads=1 --nocapture >"$OUT/nccl-tests.tmp" 2>&1
    rc=$?
    cat "$OUT/nccl-tests.tmp" >>"$LOG"
    # A skipping test prints "SKIP: <name>: <reason>" (after "test <name> ... " here).
    skips=$(grep -c 'SKIP: ' "$OUT/nccl-tests.tmp")
    # Tests that skipped as a whole ("SKIP:" first on their "test NAME ... " line); a listed
    # check skipping inside the conformance run does not make the binary a SKIP.
    skipped_tests=$(grep -cE '^test .* \.\.\. SKIP:' "$OUT/nccl-tests.tmp")
    ran=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$OUT/nccl-tests.tmp" | tail -1)
    if [ "$rc" -eq 0 ] && [ -n "$ran" ] && [ "$skipped_tests" -ge "$ran" ]; then
        note "SKIP NCCL tests $(basename "$t"): every test printed SKIP ($(grep -m1 -o 'SKIP: .*' "$OUT/nccl-tests.tmp" | cut -c1-160))"
    else
        status "NCCL tests $(basename "$t")" "$rc"
    fi
    note "     $(grep -E '^test result' "$OUT/nccl-tests.tmp" | tail -1) skips=$skips $(grep -E '^(FAIL|PASS) coll_' "$OUT/nccl-tests.tmp" | awk '{print $1}' | sort | uniq -c | tr '\n' ' ')"
    rm -f "$OUT/nccl-tests.tmp"
done
if step tests && [ "$ntests" -eq 0 ]; then
    note "SKIP NCCL tests: no NCCL test binary in $BUNDLE/bin (bundle with FEATURES=\"cuda xstream-cuda/nccl\")"
fi

SWEEP=(collectives --backend "${BACKEND:-cuda}" --op all_reduce --dtype f32 --min-bytes 8 --max-bytes "$MAX" --iters "$ITERS" --warmup "$WARMUP")

# 2. xstream, one process driving both GPUs.
if step xs1; then
    echo "===== xstream one process, $WORLD rank(s)" >>"$LOG"
    timeout 150 "$XS" "${SWEEP[@]}" --ranks "$WORLD" >"$OUT/xs1.txt" 2>>"$LOG"
    status "xstream one process" $?
fi

# 3. xstream, one process per GPU, joined through RANK/WORLD_SIZE/LOCAL_RANK and an id file.
echo "===== xstream one process per GPU" >>"$LOG"
if ! step xs2; then
    :
elif [ "$WORLD" -lt 2 ]; then
    echo "# skipped: one rank (one GPU)" >"$OUT/xs2.txt"
    note "SKIP xstream one process per GPU (one GPU: nothing to join across processes)"
elif [ "${BACKEND:-cuda}" = host ]; then
    # Host jobs do not cross processes (the host backend refuses an id of another process).
    echo "# skipped: host jobs are in-process" >"$OUT/xs2.txt"
    note "SKIP xstream one process per GPU (host jobs are in-process)"
else
    IDDIR="$(mktemp -d)"
    pids=()
    for r in 0 1; do
        RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r XSTREAM_UNIQUE_ID_FILE="$IDDIR/id" \
            timeout 150 "$XS" "${SWEEP[@]}" >"$OUT/xs2.rank$r.txt" 2>>"$LOG" &
        pids+=($!)
    done
    rc2=0; for p in "${pids[@]}"; do wait "$p" || rc2=$?; done
    mv "$OUT/xs2.rank0.txt" "$OUT/xs2.txt"; cat "$OUT/xs2.rank1.txt" >>"$LOG"; rm -f "$OUT/xs2.rank1.txt"
    status "xstream one process per GPU" "$rc2"
fi

# 3b. xstream, one process per GPU, launched by torchrun (--no-python): the ranks meet through
#     MASTER_ADDR/MASTER_PORT (the TCP rendezvous of xstream_core::collective::rendezvous), no
#     id file. Its table should match step 3's.
echo "===== xstream one process per GPU, torchrun + TCP rendezvous" >>"$LOG"
if command -v torchrun >/dev/null; then TR=(torchrun); else TR=(python3 -m torch.distributed.run); fi
if ! step xs3; then
    :
elif [ "$WORLD" -lt 2 ] || [ "${BACKEND:-cuda}" = host ]; then
    echo "# skipped: one rank or host backend (host jobs are in-process)" >"$OUT/xs3.txt"
    note "SKIP xstream torchrun + TCP rendezvous (one GPU or host backend: nothing to join across processes)"
elif ! command -v torchrun >/dev/null && ! python3 -c 'import torch' 2>/dev/null; then
    note "SKIP xstream torchrun + TCP rendezvous: neither torchrun nor the torch module is on this machine"
else
    XSTREAM_RENDEZVOUS_TIMEOUT_MS=60000 timeout 150 "${TR[@]}" --standalone --nproc_per_node="$WORLD" --no-python \
        "$XS" "${SWEEP[@]}" >"$OUT/xs3.txt" 2>>"$LOG"
    rc3=$?
    # PASS needs the exit status and a table row from rank 0.
    if [ "$rc3" -eq 0 ] && ! grep -qE '^ *[0-9]+ ' "$OUT/xs3.txt"; then rc3=1; note "     xs3: no table rows in $OUT/xs3.txt"; fi
    status "xstream torchrun + TCP rendezvous" "$rc3"
fi

# 4. PyTorch, torchrun, same sizes.
echo "===== torch.distributed.all_reduce (torchrun)" >>"$LOG"
PY="$ROOT/scripts/torch_allreduce.py"; [ -f "$PY" ] || PY="$BUNDLE/torch_allreduce.py"
if command -v torchrun >/dev/null; then TR=(torchrun); else TR=(python3 -m torch.distributed.run); fi
if step torch && ! command -v torchrun >/dev/null && ! python3 -c 'import torch' 2>/dev/null; then
    note "SKIP torch: neither torchrun nor the torch module is on this machine"
elif step torch; then
    timeout 180 "${TR[@]}" --standalone --nproc_per_node="$WORLD" "$PY" --min-bytes 8 --max-bytes "$MAX" --iters "$ITERS" --warmup "$WARMUP" >"$OUT/torch.txt" 2>>"$LOG"
    rc=$?
    if grep -q '^SKIP' "$OUT/torch.txt"; then note "SKIP torch: $(grep -m1 '^SKIP' "$OUT/torch.txt")"; else status torch "$rc"; fi
fi

# 5. xstream against raw NCCL in one process (same library, contexts and state), interleaved.
if step raw; then
    echo "===== bench gpu_nccl (xstream vs raw ncclAllReduce)" >>"$LOG"
    if [ ! -x "$BUNDLE/bench/gpu_nccl" ]; then
        note "SKIP raw: $BUNDLE/bench/gpu_nccl is not in the bundle"
    else
        RAWMAX=$MAX; [ "${BACKEND:-cuda}" = cuda ] || RAWMAX=64K
        OUT="$OUT" XS_MAX="$RAWMAX" XS_ITERS="$ITERS" timeout 200 "$BUNDLE/bench/gpu_nccl" >"$OUT/raw.txt" 2>>"$LOG"
        rc=$?
        cat "$OUT/raw.txt" >>"$LOG"
        if grep -q '^SKIP' "$OUT/raw.txt"; then note "SKIP raw: $(grep -m1 '^SKIP' "$OUT/raw.txt")"; else status "xstream vs raw NCCL (gpu_nccl)" "$rc"; fi
        l=$(grep -m1 '^Targets' "$OUT/raw.txt")
        if [[ "$l" == *"NOT MET"* ]]; then note "FAIL raw targets: $l"; FAILED=1; elif [ -n "$l" ]; then note "     $l"; fi
    fi
fi

for f in xs1 xs2 xs3 torch; do [ -f "$OUT/$f.txt" ] && { echo; echo "== $f"; cat "$OUT/$f.txt"; }; done | tee -a "$LOG"

# 6. Side by side (bus bandwidth and time per size), and the targets.
python3 - "$OUT/xs1.txt" "$OUT/xs2.txt" "$OUT/torch.txt" "$WORLD" >"$MD" <<'PY'
import sys
one = sys.argv[4] == "1"
col = 5 if one else 6  # one rank: algbw (busbw is 0 by definition); else busbw
bw = "algbw" if one else "busbw"
def load(p):
    rows = {}
    try:
        for line in open(p):
            f = line.split()
            if line.startswith("#") or len(f) < 8 or not f[0].isdigit():
                continue
            rows[int(f[0])] = (float(f[4]), float(f[col]), f[7])
    except OSError:
        pass
    return rows
x1, x2, t = (load(p) for p in sys.argv[1:4])
if one:
    x2 = x1  # the one-rank job is the one compared
    print(f"| size (B) | xstream 1 rank: us / {bw} GB/s | torch 1 rank: us / {bw} GB/s | {bw} xstream / torch | latency xstream - torch (us) |")
    print("|---:|---:|---:|---:|---:|")
else:
    print(f"| size (B) | xstream 1 proc: us / {bw} GB/s | xstream 2 procs: us / {bw} GB/s | torch: us / {bw} GB/s | {bw} 2 procs / torch | latency 2 procs - torch (us) |")
    print("|---:|---:|---:|---:|---:|---:|")
fails = []
for s in sorted(set(x1) | set(x2) | set(t)):
    c = lambda r: f"{r[s][0]:.2f} / {r[s][1]:.2f}" + ("" if r[s][2] in ("ok", "-") else " WRONG") if s in r else "n/a"
    ratio = dlat = ""
    if s in x2 and s in t and t[s][1] > 0:
        q = x2[s][1] / t[s][1]; ratio = f"{100 * q:.1f}%"
        if not one and s >= 64 << 20 and q < 0.95: fails.append(f"{s} B: {ratio} of torch's bus bandwidth")
    if s in x2 and s in t:
        d = x2[s][0] - t[s][0]; dlat = f"{d:+.2f}"
        if s == 8 and d > 2.0: fails.append(f"8 B: latency {dlat} us over torch")
    if one:
        print(f"| {s} | {c(x1)} | {c(t)} | {ratio} | {dlat} |")
    else:
        print(f"| {s} | {c(x1)} | {c(x2)} | {c(t)} | {ratio} | {dlat} |")
wrong = [s for r in (x1, x2, t) for s in r if r[s][2] not in ("ok", "-")]
if wrong:
    fails.append(f"wrong results at {sorted(set(wrong))} B")
print()
if one:
    # PyTorch short-cuts a group of one (its time stays flat from 8 B to 1 GiB, far above any
    # memory's bandwidth), so torch is no baseline here: the raw step is the one-rank check.
    flat = t and min(t) in t and max(t) in t and t[max(t)][0] < 4 * t[min(t)][0]
    print("One rank: no target is checked against torch" + (
        " (its time stays flat up to the largest size: it does not run NCCL's kernel for a group of one)"
        if flat else "") + "; see the raw step (xstream vs raw ncclAllReduce) for the like-for-like check.")
    if wrong:
        print(f"NOT MET: wrong results at {sorted(set(wrong))} B")
else:
    print("Targets (>= 95% of torch's bus bandwidth at >= 64 MiB, 8 B latency within 2 us):",
          "MET" if not fails and x2 and t else "NOT MET: " + "; ".join(fails or ["missing data"]))
PY
echo
cat "$MD"
echo
if grep -q 'WRONG' "$MD"; then note "FAIL a result was wrong (see the table)"; FAILED=1; fi
# The side-by-side targets (two ranks: xstream one process per GPU against torch).
tl=$(grep -m1 -E '^(Targets|NOT MET)' "$MD")
if [[ "$tl" == *"NOT MET"* ]]; then
    if step xs2 && step torch; then note "FAIL side-by-side targets: $tl"; FAILED=1
    else note "SKIP side-by-side targets: steps xs2 and torch did not both run in this call ($tl)"; fi
elif [ -n "$tl" ]; then
    note "PASS side-by-side targets: $tl"
fi
echo "== SUMMARY"
printf '%s' "$SUM"
exit "$FAILED"
