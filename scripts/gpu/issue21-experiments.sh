#!/usr/bin/env bash
# issue21-experiments.sh: the two open compute-sanitizer findings, narrowed on the GPU machine.
# Run there from the repository root after unpacking the GPU bundle (gpu-bundle/bin):
#   bash scripts/gpu/issue21-experiments.sh
# Writes $OUT/issue21.log; each step prints its command and exit status.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
LOG="$OUT/issue21.log"; : >"$LOG"
B=gpu-bundle/bin
step() { # label, command...
    local label="$1"; shift
    echo "===== $label: $*" >>"$LOG"
    timeout 300 "$@" >>"$LOG" 2>&1
    echo "----- $label: exit $?" >>"$LOG"
}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; compute-sanitizer --version | tail -1; date -u; } >>"$LOG" 2>&1
command -v gdb >>"$LOG" 2>&1 || echo "no gdb" >>"$LOG"
nvcc -O2 -o /tmp/capture_memcheck scripts/gpu/capture_memcheck.cu -lcuda >>"$LOG" 2>&1 || echo "nvcc failed" >>"$LOG"
MC=(compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99)
# 1. Raw driver: capture after a module's first launch vs its first launch inside the capture.
step raw-native-cold /tmp/capture_memcheck
step raw-native-warm /tmp/capture_memcheck warm
step raw-memcheck-cold "${MC[@]}" /tmp/capture_memcheck
step raw-memcheck-warm "${MC[@]}" /tmp/capture_memcheck warm
step raw-memcheck-cold-eager env CUDA_MODULE_LOADING=EAGER "${MC[@]}" /tmp/capture_memcheck
# 2. xstream's test alone, natively and under memcheck, lazy and eager module loading.
T=persistent_stream_records
step xs-native "$B/xstream-cuda--cuda--test" --exact "$T" --test-threads=1
step xs-memcheck "${MC[@]}" "$B/xstream-cuda--cuda--test" --exact "$T" --test-threads=1
step xs-memcheck-eager env CUDA_MODULE_LOADING=EAGER "${MC[@]}" "$B/xstream-cuda--cuda--test" --exact "$T" --test-threads=1
# 3. ipc_memory's signal 11: whole binary, each test alone, parent only, eager loading.
I="$B/xstream-cuda--ipc_memory--test"
step ipc-native "$I" --test-threads=1
step ipc-memcheck-all "${MC[@]}" --target-processes all "$I" --test-threads=1
step ipc-memcheck-app "${MC[@]}" --target-processes application-only "$I" --test-threads=1
for t in $("$I" --list 2>/dev/null | sed -n 's/: test$//p'); do
    step "ipc-memcheck-$t" "${MC[@]}" --target-processes all "$I" --exact "$t" --test-threads=1
done
step ipc-memcheck-eager env CUDA_MODULE_LOADING=EAGER "${MC[@]}" --target-processes all "$I" --test-threads=1
if command -v gdb >/dev/null; then
    step ipc-memcheck-gdb-core bash -c "ulimit -c unlimited; cd /tmp && ${MC[*]} --target-processes all $PWD/$I --test-threads=1; ls -la /tmp/core* 2>/dev/null"
fi
grep -E "^(=====|-----)|RESULT|launch in capture|end capture|ERROR SUMMARY|test result|panicked|Segmentation|signal|LEAK" "$LOG" >"$OUT/issue21-summary.txt"
cat "$OUT/issue21-summary.txt"
