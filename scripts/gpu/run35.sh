#!/usr/bin/env bash
# run35.sh: the fourth call of the 2026-11-28 afternoon session (nvidia-h200, one GPU), one
# probe. Run 34 found which earlier data_path test makes a later capture end invalidated under
# memcheck: allocations_are_rounded_to_the_granule (4 of 4 runs), the test that makes a
# stream-ordered allocation. This asks the driver alone: capture_teardown.cu with a
# stream-ordered allocation and free of the default pool made before the first capture (setup
# "pool", "pool_range" with cuMemGetAddressRange) and without ("fresh"), plainly and under
# memcheck. A probe: each row is PASS when no capture was invalidated, FAIL with the count.
# Device call: no carry, command: bash scripts/gpu/run35.sh
# Output in $OUT: run35-summary.tsv, run35-logs.tar.gz.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_run_init run35 120

machine_info
MC=(compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 99)
ct=$W/capture_teardown
if ! command -v nvcc >/dev/null; then
    step capture_teardown SKIP 0 "nvcc not on PATH"
elif ! nvcc -O2 -o "$ct" "$(dirname "${BASH_SOURCE[0]}")/capture_teardown.cu" -lcuda -lpthread >"$W/ct-build.log" 2>&1; then
    step capture_teardown FAIL 0 "nvcc failed (ct-build.log)"
else
    for setup in fresh pool pool_range; do
        for m in relaxed global; do
            for how in plain memcheck; do
                if [ "$(left)" -lt 10 ]; then step "ct-$setup-$m-$how" SKIP 0 "time budget spent"; continue; fi
                s=$SECONDS
                pre=(); [ "$how" = memcheck ] && pre=("${MC[@]}")
                CUDA_LOG_FILE=stderr timeout "$(cap 30)" "${pre[@]}" "$ct" "$m" "$setup" >"$W/ct-$setup-$m-$how.log" 2>&1
                rc=$?
                inv=$(grep -E '^OP .*invalidated' "$W/ct-$setup-$m-$how.log" | awk '{print $2}' | tr '\n' ' ')
                resl=$(grep -m1 '^RESULT' "$W/ct-$setup-$m-$how.log")
                v=FAIL; [ $rc -eq 0 ] && [ -n "$resl" ] && v=PASS
                step "ct-$setup-$m-$how" "$v" "$((SECONDS - s))" "rc=$rc $resl${inv:+; invalidated by: $inv}"
            done
        done
    done
fi

finish
[ "$nf" -eq 0 ]
