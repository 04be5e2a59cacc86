#!/usr/bin/env bash
# exit-others.sh: at the exit fault under compute-sanitizer memcheck, what every other thread
# was doing (segv_trace.so with SEGV_TRACE_ALL=1). The modules test binary ROUNDS times (it
# died at exit 8 of 8 times in exit-raw.sh), and exit_raw with its poller left running (the
# plain program whose other thread is known to be in cudaStreamQuery). Device call, one GPU:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/exit-others.sh
# Exit status: 1 when it cannot run (segv_trace.so missing, nvcc failed); 0 once every run was
# made and recorded. A run that dies is this probe's data (counted in its output), not a failure
# of the script.
set -u
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib RUST_BACKTRACE=1 SEGV_TRACE_ALL=1
SO=$PWD/segv_trace.so
O=${OUT:-/tmp/exit-others}
W=$(mktemp -d /tmp/exit-others.XXXX)
ROUNDS=${ROUNDS:-3}
mkdir -p "$O"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date; } | tee "$O/exit-others.txt"
[ -f "$SO" ] || { echo "FAIL: $SO missing"; exit 1; }
nvcc -O2 -o "$W/exit_raw" scripts/gpu/exit_raw.cu -lcuda -lpthread || { echo "FAIL: nvcc"; exit 1; }
one() { # tag cmd...
    local tag=$1; shift
    LD_PRELOAD=$SO timeout 120 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
        --target-processes all --error-exitcode 99 "$@" >"$W/$tag.log" 2>&1
    echo "$tag rc=$? segv=$(grep -c '^segv_trace: pid' "$W/$tag.log")" | tee -a "$O/exit-others.txt"
    grep '^segv_trace' "$W/$tag.log" >>"$O/exit-others.txt"
}
for i in $(seq 1 "$ROUNDS"); do
    one "modules-$i" gpu-bundle/bin/xstream-cuda--modules--test --test-threads=1
done
for i in 1 2 3 4; do
    one "raw-poller-$i" "$W/exit_raw" p
    grep -q "^segv_trace: pid" "$W/raw-poller-$i.log" && break
done
exit 0
