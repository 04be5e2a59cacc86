#!/usr/bin/env bash
# exit-bisect.sh: the modules test binary built at several commits (bisect-bins/modules-<sha>,
# from bisect.tar.xz, built here with `cargo test -p xstream-cuda --features xstream-cuda/nvrtc
# --test modules --no-run` at each commit) and the bundle's, each ROUNDS times under
# compute-sanitizer memcheck, interleaved: which commit made the process die at exit. Then the
# data_path binary whole under memcheck DP_ROUNDS times with the driver's error log on
# (CUDA_LOG_FILE=stderr), for the capture that ended Invalidated in run 29, and that test
# after each test named in DP_BEFORE (one process each). Device call:
#   tar xJf gpu-bundle.tar.xz && tar xJf bisect.tar.xz && bash scripts/gpu/exit-bisect.sh
# Exit status: 1 when it cannot run (no bisect-bins/ or no bundle); 0 once every run was
# made and recorded. A run that dies is this probe's data (counted in its output), not a failure
# of the script.
set -u
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib RUST_BACKTRACE=1
O=${OUT:-/tmp/exit-bisect}
W=$(mktemp -d /tmp/exit-bisect.XXXX)
ROUNDS=${ROUNDS:-3}
DP_ROUNDS=${DP_ROUNDS:-3}
mkdir -p "$O"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date; } | tee "$O/exit-bisect.txt"
[ -d bisect-bins ] || { echo "FAIL: bisect-bins/ missing (tar xJf bisect.tar.xz)"; exit 1; }
cp gpu-bundle/bin/xstream-cuda--modules--test bisect-bins/modules-HEAD || { echo "FAIL: no bundle"; exit 1; }
san() { # tag cmd...
    local tag=$1; shift
    timeout 120 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
        --target-processes all --error-exitcode 99 "$@" >"$W/$tag.log" 2>&1
    echo "$tag rc=$? $(grep -m1 '^test result' "$W/$tag.log" | cut -c1-60)" | tee -a "$O/exit-bisect.txt"
}
for i in $(seq 1 "$ROUNDS"); do
    for b in bisect-bins/modules-*; do san "${b##*/}:$i" "$b" --test-threads=1; done
done
echo "died (rc=11) per build, of $ROUNDS:" | tee -a "$O/exit-bisect.txt"
for b in bisect-bins/modules-*; do
    echo "${b##*/}: $(grep -c "^${b##*/}:.* rc=11" "$O/exit-bisect.txt")" | tee -a "$O/exit-bisect.txt"
done
for i in $(seq 1 "$DP_ROUNDS"); do
    CUDA_LOG_FILE=stderr san "data_path:$i" gpu-bundle/bin/xstream-cuda--data_path--test --test-threads=1 --skip memory_is_flat_after_100k_host_buffer_and_async_allocation_cycles
    grep -v "cuFuncGetParamInfo\|outside of kernel parameter count" "$W/data_path:$i.log" | grep -iE "\[CUDA\]|panicked|capture" | head -12 | tee -a "$O/exit-bisect.txt"
done
# data_path: the capture test after each earlier test of the binary alone (which one leaves
# what invalidates it).
for t in ${DP_BEFORE:-}; do
    san "data_path-after-$t" gpu-bundle/bin/xstream-cuda--data_path--test --test-threads=1 --exact "$t" host_access_waits_for_copies_made_before_a_capture
done
tar czf "$O/exit-bisect-logs.tar.gz" -C "$W" .
exit 0
