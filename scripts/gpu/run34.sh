#!/usr/bin/env bash
# run34.sh: the probes of the third call of the 2026-11-28 afternoon session (nvidia-h200-x2),
# run before run23.sh in the same call. Run 33 found one data_path capture invalidated under
# memcheck in the binary's run (captures_survive_teardown_on_background_threads; run 31 had
# host_access_waits_for_copies_made_before_a_capture), while each passed under memcheck alone
# and every test passed without the sanitizer; a raw program's releases on another thread did
# not invalidate a capture under memcheck (capture_teardown, nine operations on idle objects).
# These probes narrow it:
#   pair-N-K     data_path with only the named tests (--exact, in name order, one process)
#                under memcheck, CUDA_LOG_FILE=stderr; run K of 2. PASS when the tests passed
#                and memcheck exited 0 (a probe: FAIL says which set invalidates);
#   plain-3-K    set 3 without the sanitizer;
#   memcheck     the data_path binary under memcheck as gpu-run.sh runs it now (its capture
#                tests alone, san_alone);
#   ct-M-H       capture_teardown.cu (now with the busy-stream operations) as in run33.sh.
# Device call: carry ["gpu-bundle.tar.xz"], command:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/run34.sh; <run23.sh as in the README>
# Output in $OUT: run34-summary.tsv, run34-logs.tar.gz.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_run_init run34 120

machine_info
need_bundle
MC=(compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 99)
dp=$G/bin/xstream-cuda--data_path--test
cs=captures_survive_teardown_on_background_threads
ha=host_access_waits_for_copies_made_before_a_capture
al=allocations_are_rounded_to_the_granule
bc=bad_copies_are_clear_errors
sets=("$al $cs" "$bc $cs" "$al $bc $cs" "$bc $ha" "$al $ha")
probe() { # name prefix-command... -- tests
    local name=$1; shift
    local pre=() t rc res inv
    while [ "$1" != -- ]; do pre+=("$1"); shift; done; shift
    if [ "$(left)" -lt 15 ]; then step "$name" SKIP 0 "time budget spent"; return; fi
    t=$SECONDS
    CUDA_LOG_FILE=stderr timeout "$(cap 30)" "${pre[@]}" "$dp" --exact "$@" --test-threads=1 >"$W/$name.log" 2>&1
    rc=$?
    res=$(grep -m1 '^test result' "$W/$name.log")
    inv=$(grep -E '^test .*FAILED' "$W/$name.log" | awk '{print $2}' | tr '\n' ' ')
    v=FAIL; [ $rc -eq 0 ] && [ "${res#test result: ok}" != "$res" ] && v=PASS
    step "$name" "$v" "$((SECONDS - t))" "tests: $*; rc=$rc $res${inv:+; failed: $inv}"
}
if [ -x "$dp" ]; then
    for i in "${!sets[@]}"; do
        for k in 1 2; do probe "pair-$((i + 1))-$k" "${MC[@]}" -- ${sets[$i]}; done
    done
    for k in 1 2; do probe "plain-3-$k" env -- ${sets[2]}; done
    memcheck xstream-cuda--data_path--test 60 all
else
    step data_path SKIP 0 "data_path binary not in the bundle"
fi

ct=$W/capture_teardown
if ! command -v nvcc >/dev/null; then
    step capture_teardown SKIP 0 "nvcc not on PATH"
elif ! nvcc -O2 -o "$ct" "$(dirname "${BASH_SOURCE[0]}")/capture_teardown.cu" -lcuda -lpthread >"$W/ct-build.log" 2>&1; then
    step capture_teardown FAIL 0 "nvcc failed (ct-build.log)"
else
    for m in relaxed global; do
        for how in plain memcheck; do
            if [ "$(left)" -lt 10 ]; then step "ct-$m-$how" SKIP 0 "time budget spent"; continue; fi
            s=$SECONDS
            pre=(); [ "$how" = memcheck ] && pre=("${MC[@]}")
            timeout "$(cap 30)" "${pre[@]}" "$ct" "$m" >"$W/ct-$m-$how.log" 2>&1
            rc=$?
            inv=$(grep -E '^OP .*invalidated' "$W/ct-$m-$how.log" | awk '{print $2}' | tr '\n' ' ')
            resl=$(grep -m1 '^RESULT' "$W/ct-$m-$how.log")
            v=FAIL; [ $rc -eq 0 ] && [ -n "$resl" ] && v=PASS
            step "ct-$m-$how" "$v" "$((SECONDS - s))" "rc=$rc $resl${inv:+; invalidated by: $inv}"
        done
    done
fi

finish
[ "$nf" -eq 0 ]
