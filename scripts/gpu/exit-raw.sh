#!/usr/bin/env bash
# exit-raw.sh: exit_raw.cu (a plain CUDA program) under compute-sanitizer memcheck, ROUNDS times
# with its poller thread joined and ROUNDS times with it left running at exit, then the xstream
# modules test binary ROUNDS times, interleaved; one line per run, then counts. A signal 11 of
# the plain program says the exit fault is the sanitizer's or the driver's on this machine.
# Needs segv_trace.so in the repository root. Device call, one GPU:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/exit-raw.sh
# Exit status: 1 when it cannot run (segv_trace.so missing, nvcc failed); 0 once every run was
# made and recorded. A run that dies is this probe's data (counted in its output), not a failure
# of the script.
set -u
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib RUST_BACKTRACE=1
SO=$PWD/segv_trace.so
O=${OUT:-/tmp/exit-raw}
W=$(mktemp -d /tmp/exit-raw.XXXX)
ROUNDS=${ROUNDS:-8}
mkdir -p "$O"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date; compute-sanitizer --version | tail -1; } | tee "$O/exit-raw.txt"
[ -f "$SO" ] || { echo "FAIL: $SO missing"; exit 1; }
nvcc -O2 -o "$W/exit_raw" scripts/gpu/exit_raw.cu -lcuda -lpthread || { echo "FAIL: nvcc"; exit 1; }
one() { # tag cmd...
    local tag=$1; shift
    LD_PRELOAD=$SO timeout 120 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
        --target-processes all --error-exitcode 99 "$@" >"$W/$tag.log" 2>&1
    echo "$tag rc=$? segv=$(grep -c '^segv_trace: pid' "$W/$tag.log") $(grep -m1 -E '^exit_raw|^test result' "$W/$tag.log" | cut -c1-50)" | tee -a "$O/exit-raw.txt"
}
for i in $(seq 1 "$ROUNDS"); do
    one "raw-joined:$i" "$W/exit_raw"
    one "raw-poller:$i" "$W/exit_raw" p
    one "xstream-modules:$i" gpu-bundle/bin/xstream-cuda--modules--test --test-threads=1
done
for t in raw-joined raw-poller xstream-modules; do
    echo "$t: $(grep -c "^$t:.* segv=[1-9]" "$O/exit-raw.txt") of $ROUNDS runs died at exit" | tee -a "$O/exit-raw.txt"
done
tar czf "$O/exit-raw-logs.tar.gz" -C "$W" --exclude=exit_raw .
exit 0
