#!/usr/bin/env bash
# run17.sh: GPU run 17 (one call): the raw-driver IPC self-open experiment of issue 21, then the
# bundled tests (conformance on CUDA, the CUDA backend's cuda/modules/data_path binaries), three
# examples and the benches (gpu_ops, gpu_ipc, any_dispatch) through gpu-run.sh.
# Run from the repository root with gpu-bundle/ unpacked. Everything lands in $OUT/run17.tar.gz
# and $OUT/summary17.txt. Exits non-zero when nvcc fails to build the experiment or gpu-run.sh
# fails (the logs are packed either way).
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT/r17"
R="$OUT/r17"
rc=0
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
    nvcc -O2 -o /tmp/ipc_self_open scripts/gpu/ipc_self_open.cu -lcuda || echo "FAIL: nvcc failed"
    MC=(compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 --target-processes all)
    for mode in "" open; do
        echo "===== native ipc_self_open $mode"; timeout 60 /tmp/ipc_self_open $mode; echo "----- exit $?"
        echo "===== memcheck ipc_self_open $mode"; timeout 60 "${MC[@]}" /tmp/ipc_self_open $mode; echo "----- exit $?"
    done
} >"$R/issue21b.log" 2>&1
if grep -q '^FAIL: nvcc failed' "$R/issue21b.log"; then
    echo "FAIL: nvcc could not build scripts/gpu/ipc_self_open.cu (see issue21b.log)" | tee -a "$R/run.txt"
    rc=1
fi
OUT="$R" NO_CLI=1 BENCH=1 BUDGET="${BUDGET:-220}" timeout 250 bash gpu-bundle/gpu-run.sh >>"$R/run.txt" 2>&1
gpu_rc=$?
echo "gpu-run exit $gpu_rc" >>"$R/run.txt"
[ "$gpu_rc" -eq 0 ] || rc=1
{ grep -E "^(=====|-----)|END reached|-> " "$R/issue21b.log"; echo; cat "$R/summary.txt" 2>/dev/null; } >"$OUT/summary17.txt"
tar czf "$OUT/run17.tar.gz" -C "$OUT" r17
{ grep -E '^FAIL: nvcc' "$R/run.txt"; echo "gpu-run exit $gpu_rc"; } >>"$OUT/summary17.txt"
cat "$OUT/summary17.txt"
exit "$rc"
