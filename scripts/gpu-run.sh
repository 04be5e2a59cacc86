#!/usr/bin/env bash
# gpu-run.sh: run the bundle made by scripts/gpu-bundle.sh on the GPU machine.
#
# Called by the device `run` tool from the repository root, with carry ["gpu-bundle"]:
#     bash gpu-bundle/gpu-run.sh
#     SANITIZE=xstream-cuda--cuda--test bash gpu-bundle/gpu-run.sh   # one binary under compute-sanitizer
#     ONLY=cuda bash gpu-bundle/gpu-run.sh                            # only manifest names matching
#     BENCH=1 bash gpu-bundle/gpu-run.sh      # also the benches: bench/gpu_ops, then torch_bench.py
#     BENCH=only bash gpu-bundle/gpu-run.sh   # only the benches (no tests, no CLI)
#   Bench output goes to tests.log; tables to gpu_bench.md, gpu_bench.json, torch_bench.md in $OUT
#   (only 8 files come back); both tables are printed last.
# Flow: driver info -> each test binary of gpu-bundle/manifest.tsv (CUDA ones with
# --test-threads=1, 300 s each) -> bench/CLI smoke if present -> logs in $OUT (few files:
# only 8 come back) -> a short PASS/FAIL summary printed last (12,000 chars of output come back).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1
LOG="$OUT/tests.log"
SUM="$OUT/summary.txt"
: >"$LOG"; : >"$SUM"

{
    echo "== machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode,persistence_mode --format=csv 2>&1 || echo "nvidia-smi unavailable"
    nvidia-smi 2>&1 | head -15
    ls -l /usr/local/nvidia/lib64/libcuda.so* 2>&1 | head -3
} >"$OUT/machine.txt" 2>&1
head -4 "$OUT/machine.txt"

run_one() { # name
    local name="$1" bin="$HERE/bin/$1" args=()
    case "$name" in *cuda*) args+=(--test-threads=1) ;; esac
    echo "===== $name" >>"$LOG"
    local t0=$SECONDS
    timeout 300 "$bin" "${args[@]}" --nocapture >>"$LOG.tmp" 2>&1
    local rc=$?
    cat "$LOG.tmp" >>"$LOG"
    local res; res=$(grep -E "^test result:" "$LOG.tmp" | tail -1)
    local skips; skips=$(grep -cE "(^|\.\.\. )SKIP:" "$LOG.tmp")
    local fails; fails=$(grep -E "^test .* FAILED$" "$LOG.tmp" | sed 's/^test //; s/ \.\.\. FAILED$//' | tr '\n' ' ')
    rm -f "$LOG.tmp"
    local verdict=PASS; [ $rc -eq 0 ] || verdict="FAIL(rc=$rc)"
    printf '%-6s %-55s %4ss skips=%s %s %s\n' "$verdict" "$name" "$((SECONDS - t0))" "$skips" "${res#test result: }" "${fails:+failed: $fails}" >>"$SUM"
}

while IFS=$'\t' read -r name pkg tgt; do
    [ -n "$name" ] || continue
    [ -z "${ONLY:-}" ] || [[ "$name" == *"$ONLY"* ]] || continue
    [ "${BENCH:-}" != only ] || continue
    run_one "$name"
done <"$HERE/manifest.tsv"

if [ -n "${SANITIZE:-}" ]; then
    if command -v compute-sanitizer >/dev/null; then
        echo "===== compute-sanitizer $SANITIZE" >"$OUT/sanitizer.log"
        timeout 500 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
            "$HERE/bin/$SANITIZE" --test-threads=1 --skip fault --skip destroy_with_pending >>"$OUT/sanitizer.log" 2>&1
        echo "SANITIZE $SANITIZE rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)" >>"$SUM"
    else
        echo "SANITIZE: compute-sanitizer not found" >>"$SUM"
    fi
fi

if [ -x "$HERE/bin/xstream" ] && [ -z "${NO_CLI:-}" ] && [ "${BENCH:-}" != only ]; then
    : >"$OUT/cli.log"
    for cmd in "info" "demo --backend cuda --trace $OUT/trace.json" "conform --backend cuda" \
               "demo --backend host --streams 4"; do
        echo "===== xstream $cmd" >>"$OUT/cli.log"
        # shellcheck disable=SC2086
        timeout 120 "$HERE/bin/xstream" $cmd >>"$OUT/cli.log" 2>&1
        echo "CLI xstream $cmd rc=$?" >>"$SUM"
    done
fi

if [ -d "$HERE/bin/examples" ] && [ "${BENCH:-}" != only ]; then
    : >"$OUT/examples.log"
    for e in "$HERE"/bin/examples/*; do
        args="--backend cuda"
        ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
        [ "$(basename "$e")" = data-parallel-allreduce ] && args="--backend cuda --ranks ${ngpu:-1}"
        echo "===== $(basename "$e") $args" >>"$OUT/examples.log"
        # shellcheck disable=SC2086
        timeout 120 "$e" $args >>"$OUT/examples.log" 2>&1
        echo "EXAMPLE $(basename "$e") $args rc=$?" >>"$SUM"
    done
fi

if [ -n "${BENCH:-}" ] && [ "${BENCH}" != 0 ]; then
    # gpu_ops: ~10-30 s; torch_bench.py: ~10-30 s (plus torch import). Logs into tests.log.
    if [ -x "$HERE/bench/gpu_ops" ]; then
        echo "===== bench gpu_ops" >>"$LOG"
        t0=$SECONDS
        OUT="$OUT" timeout 300 "$HERE/bench/gpu_ops" >>"$LOG" 2>&1
        rc=$?; v=PASS; [ $rc -eq 0 ] || v="FAIL(rc=$rc)"
        nf=$(grep -c '| FAIL' "$OUT/gpu_bench.md" 2>/dev/null)
        echo "$v BENCH gpu_ops $((SECONDS - t0))s: ${nf:-?} rows miss a target" >>"$SUM"
    else
        echo "BENCH gpu_ops: not in the bundle (bench/gpu_ops)" >>"$SUM"
    fi
    if [ -f "$HERE/torch_bench.py" ]; then
        echo "===== bench torch_bench.py" >>"$LOG"
        t0=$SECONDS
        OUT="$OUT" timeout 300 python3 "$HERE/torch_bench.py" >>"$LOG" 2>&1
        rc=$?; v=PASS; [ $rc -eq 0 ] || v="FAIL(rc=$rc)"
        echo "$v BENCH torch_bench.py $((SECONDS - t0))s" >>"$SUM"
    else
        echo "BENCH torch_bench.py: not in the bundle" >>"$SUM"
    fi
fi

echo
echo "== failing tests (tail of log)"
grep -E "panicked at|^test .* FAILED|^---- " "$LOG" | tail -40
echo
echo "== SUMMARY (full logs: tests.log, summary.txt, machine.txt in \$OUT)"
cat "$SUM"
if [ -n "${BENCH:-}" ] && [ "${BENCH}" != 0 ]; then
    for f in gpu_bench.md:gpu_ops torch_bench.md:torch_bench; do
        echo
        if [ -f "$OUT/${f%%:*}" ]; then cat "$OUT/${f%%:*}"; else
            echo "(${f%%:*} missing; from tests.log:)"
            sed -n "/^===== bench ${f#*:}/,/^===== /p" "$LOG" | grep -v "^===== " | tail -8
        fi
    done
fi
grep -q "^FAIL" "$SUM" && exit 1 || exit 0
