#!/usr/bin/env bash
# exit-trace.sh: where test binaries die at exit under compute-sanitizer memcheck (GPU run 29
# saw signal 11 after every test passed in the cuda, modules and vmm_share binaries, and in
# the child process of ipc_events), and which driver call invalidates data_path's capture
# under memcheck. One device call, one GPU:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/exit-trace.sh
# needs segv_trace.so in the repository root (gcc -O1 -g -fPIC -shared -o segv_trace.so
# scripts/gpu/segv_trace.c -ldl, built here). Prints each run's exit status and the traces;
# every run's log in $OUT. The driver's error log (CUDA_LOG_FILE=stderr) is on for every run.
# Exit status: 1 when it cannot run (segv_trace.so missing, nvcc failed); 0 once every run was
# made and recorded. A run that dies is this probe's data (counted in its output), not a failure
# of the script.
set -u
G=gpu-bundle
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib RUST_BACKTRACE=1 NCCL_NVLS_ENABLE=0
export CUDA_LOG_FILE=stderr
SO=$PWD/segv_trace.so
O=${OUT:-/tmp/exit-trace}
mkdir -p "$O"
[ -f "$SO" ] || { echo "FAIL: $SO missing"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date
san() { # log name args...
    local log=$1 name=$2; shift 2
    LD_PRELOAD=$SO timeout 120 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
        --target-processes all --error-exitcode 99 "$G/bin/$name" --test-threads=1 "$@" >"$O/$log.log" 2>&1
    local rc=$?
    echo "== $log rc=$rc"
    grep -E "^test result|FAILED|panicked" "$O/$log.log" | head -5
    grep -A45 "^segv_trace:" "$O/$log.log" | head -60
    grep -iE "cuda.*(error|invalid)|CUDA_ERROR|\[.*\] " "$O/$log.log" | grep -v "^=========" | head -20
}
SK="--skip fault_is_sticky_and_fails_pending_callbacks_once --skip fault_fails_callbacks_on_other_streams --skip persistent_stream_records"
for i in 1 2; do
    san cuda-$i xstream-cuda--cuda--test $SK
    san modules-$i xstream-cuda--modules--test
    san vmm-$i xstream-cuda--vmm_share--test
done
for i in 1 2; do
    san dp-$i xstream-cuda--data_path--test --exact host_access_waits_for_copies_made_before_a_capture
done
for i in 1 2; do
    LD_PRELOAD=$SO timeout 60 "$G/bin/xstream-cuda--data_path--test" --test-threads=1 --exact host_access_waits_for_copies_made_before_a_capture >"$O/dp-plain-$i.log" 2>&1
    echo "== dp-plain-$i rc=$?"; grep -E "^test result|panicked|\[" "$O/dp-plain-$i.log" | head -8
done
san ipc-1 xstream-cuda--ipc_events--test --exact cuda_ipc_a_process_waits_on_anothers_record
exit 0
