#!/usr/bin/env bash
# issue29-diag.sh: the diagnostic device call of issue 29 (nvidia-h100-x2), recorded under
# docs/gpu-runs/<date>-2xh100-run19a/. Run from the repository root with the bundle unpacked:
#     tar xJf gpu-bundle.tar.xz && bash scripts/gpu/issue29-diag.sh
# Steps (each writes a log into $OUT and one verdict line into $OUT/summary.txt):
#  1. scripts/gpu/free_stall.cu: which call on a second thread, made while a stream is held by
#     a host function, holds the main thread's non-blocking calls (the conformance flake's
#     mechanism; one line per variant).
#  2. gpu_ipc --gpus 2 (the configuration "consumer on device 1") with XSTREAM_GPU_IPC_TRACE=1
#     and scripts/gpu/segv_trace.c preloaded: the step each process reached and, on SIGSEGV,
#     the faulting thread's frames (offsets symbolized afterwards against the local binary).
#  3. The ipc_memory test binary (its importer-on-device-1 test) with the same preload.
#  4. The conformance test binary on CUDA, whole suite, repeated while time is left (at most
#     10 runs): the flake's check after the fix of the stream drop.
set -u
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
B=gpu-bundle
SUM="$OUT/summary.txt"; : >"$SUM"
BUDGET="${BUDGET:-390}"
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1 NCCL_NVLS_ENABLE=0
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2; } >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

nvcc -O2 -o /tmp/free_stall scripts/gpu/free_stall.cu -lcuda -lpthread >"$OUT/build.log" 2>&1
gcc -O1 -g -fPIC -shared -o /tmp/segv_trace.so scripts/gpu/segv_trace.c -ldl >>"$OUT/build.log" 2>&1
ls -l /tmp/free_stall /tmp/segv_trace.so >>"$OUT/build.log" 2>&1

if [ -x /tmp/free_stall ]; then
    timeout 60 /tmp/free_stall >"$OUT/free_stall.txt" 2>&1; rc=$?
    echo "free_stall rc=$rc $(grep -c '^variant' "$OUT/free_stall.txt") variants" >>"$SUM"
else
    echo "free_stall: FAIL (did not build, build.log)" >>"$SUM"
fi

if [ -x /tmp/segv_trace.so ] || [ -f /tmp/segv_trace.so ]; then PRE=/tmp/segv_trace.so; else PRE=""; fi
XSTREAM_GPU_IPC_TRACE=1 LD_PRELOAD="$PRE" timeout 150 $B/bench/gpu_ipc --gpus 2 --mib 64 >"$OUT/gpu_ipc.log" 2>&1; rc=$?
echo "gpu_ipc --gpus 2 rc=$rc: $(grep -m1 -E '^FAIL|segv_trace: pid' "$OUT/gpu_ipc.log" | head -c 200)" >>"$SUM"

LD_PRELOAD="$PRE" timeout 90 $B/bin/xstream-cuda--ipc_memory--test --test-threads=1 --nocapture >"$OUT/ipc_memory.log" 2>&1; rc=$?
echo "ipc_memory rc=$rc: $(grep -E '^test result' "$OUT/ipc_memory.log")" >>"$SUM"

i=0; pass=0
while [ $i -lt 10 ] && [ $((BUDGET - SECONDS)) -gt 45 ]; do
    i=$((i + 1))
    timeout 60 $B/bin/xstream-conformance--cuda--test --test-threads=1 --nocapture >"$OUT/conf-cuda-$i.log" 2>&1; rc=$?
    if [ $rc -eq 0 ]; then pass=$((pass + 1)); fi
    echo "conformance cuda run $i rc=$rc $(grep -E '^(FAIL|PASS) event_pool_bounded' "$OUT/conf-cuda-$i.log" | head -c 120)" >>"$SUM"
done
echo "conformance cuda: $pass of $i whole runs passed" >>"$SUM"
cat "$SUM"
