#!/usr/bin/env bash
# run36.sh: the fifth call of the 2026-11-28 afternoon session (nvidia-h200, one GPU), one
# probe. Run 34 found that data_path's allocations_are_rounded_to_the_granule makes the next
# capture of the process end invalidated under memcheck; run 35 found that a stream-ordered
# allocation alone does not, with the driver alone. The test backends/cuda/tests/capture_after.rs
# makes each of that test's operations on a stream of its own, synchronizes, then captures a
# launch on another stream (RELAXED); XSTREAM_CAPTURE_AFTER=<op> keeps one operation.
#   all-plain     every operation in one process, no sanitizer;
#   all-memcheck  the same under memcheck;
#   OP-K          one operation per process under memcheck, run K of 2.
# A probe: PASS when every capture survived and memcheck exited 0; FAIL names the operations
# whose capture was invalidated.
# Carry probes.tar.xz (probes/capture_after, the test binary built here:
#   cargo test -p xstream-cuda --test capture_after --no-run --features "xstream-cuda/nccl xstream-cuda/nvrtc"
# ), command: tar xJf probes.tar.xz && bash scripts/gpu/run36.sh
# Output in $OUT: run36-summary.tsv, run36-logs.tar.gz.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_run_init run36 150

machine_info
MC=(compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 99)
p=probes/capture_after
one() { # name op-or-empty pre...
    local name=$1 op=$2; shift 2
    local t rc res inv envs=()
    if [ "$(left)" -lt 10 ]; then step "$name" SKIP 0 "time budget spent"; return; fi
    [ -n "$op" ] && envs=(XSTREAM_CAPTURE_AFTER="$op")
    t=$SECONDS
    env "${envs[@]}" CUDA_LOG_FILE=stderr timeout "$(cap 30)" "$@" "$p" --nocapture --test-threads=1 >"$W/$name.log" 2>&1
    rc=$?
    res=$(grep -m1 '^test result' "$W/$name.log")
    inv=$(grep -oE 'capture after [a-z_]+: launch Some|capture after [a-z_]+: launch None, end Some' "$W/$name.log" | awk '{print $3}' | tr -d ':' | tr '\n' ' ')
    v=FAIL; [ $rc -eq 0 ] && [ "${res#test result: ok}" != "$res" ] && ! grep -q '^SKIP' "$W/$name.log" && v=PASS
    step "$name" "$v" "$((SECONDS - t))" "rc=$rc $res${inv:+; invalidated after: $inv}"
}
if [ ! -x "$p" ]; then
    step capture_after FAIL 0 "probes/capture_after not carried"
else
    one all-plain ""
    one all-memcheck "" "${MC[@]}"
    for op in none pageable_write pageable_read device_copy alloc_async_free_async alloc_async_range_free_async address_range; do
        for k in 1 2; do one "$op-$k" "$op" "${MC[@]}"; done
    done
fi

finish
[ "$nf" -eq 0 ]
