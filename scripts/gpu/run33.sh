#!/usr/bin/env bash
# run33.sh: the second call of the 2026-11-28 afternoon session, ONE call on nvidia-h200-x2 (two
# GPUs: NCCL, peer copies, cross-device IPC): every CUDA test binary once, then every one under
# compute-sanitizer memcheck (helper 65's dispatched releases that hold their context, the
# trampolines marked as inside a callback), then the probes of the open memcheck question:
# does a capture survive a release another thread makes while it is under way, with xstream
# (data_path's captures_survive_teardown_on_background_threads, which makes that overlap on
# purpose; it passed without the sanitizer in run 32) and with the driver alone
# (scripts/gpu/capture_teardown.cu, built here with nvcc), plainly and under memcheck.
#
# Bundle, here (no GPU):
#   FEATURES="cuda xstream-cuda/nccl xstream-cuda/nvrtc" bash scripts/gpu-bundle.sh
#   bash scripts/gpu-pack.sh                      # -> gpu-bundle.tar.xz (git-ignored)
# Device call: kind nvidia-h200-x2, carry ["gpu-bundle.tar.xz"], command:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/run33.sh
#
# Steps (within BUDGET, default 540 s):
#   tests        every bundled CUDA test binary once (gpu-run.sh NO_CLI=1 NO_EXAMPLES=1);
#   memcheck     every bundled CUDA test binary under memcheck (the modules binary also under
#                racecheck and synccheck), as run31.sh;
#   dp-alone-T   data_path's capture test T under memcheck in its own process (--exact), for
#                T = captures_survive_teardown_on_background_threads and
#                host_access_waits_for_copies_made_before_a_capture;
#   ct-M-plain, ct-M-memcheck
#                capture_teardown (M = relaxed, global) plainly and under memcheck: a probe,
#                PASS when no capture was invalidated, FAIL with the operations that
#                invalidated one (the README says what that means).
# Output in $OUT: run33-summary.tsv, run33-logs.tar.gz.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_run_init run33 540

machine_info
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "${ngpu:-0}" -ge 2 ] || step gpus FAIL 0 "nvidia-h200-x2 expected: ${ngpu:-0} GPU(s) visible"
need_bundle

bundle_tests

conf=xstream-conformance--cuda--test
names=()
grep -q "^$conf"$'\t' "$G/manifest.tsv" && names+=("$conf")
while IFS=$'\t' read -r name _; do
    [ -n "$name" ] && [ "$name" != "$conf" ] && names+=("$name")
done <"$G/manifest.tsv"
san_end=$((BUDGET - 90))
for b in "${names[@]}"; do
    memcheck "$b" $((san_end - SECONDS)) all
done

MC=(compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 99)
dp=$G/bin/xstream-cuda--data_path--test
for t in captures_survive_teardown_on_background_threads host_access_waits_for_copies_made_before_a_capture; do
    if [ ! -x "$dp" ]; then step "dp-alone-$t" SKIP 0 "data_path binary not in the bundle"; continue; fi
    if [ "$(left)" -lt 30 ]; then step "dp-alone-$t" SKIP 0 "time budget spent"; continue; fi
    s=$SECONDS
    timeout "$(cap 60)" "${MC[@]}" "$dp" --exact "$t" --test-threads=1 --nocapture >"$W/dp-alone-$t.log" 2>&1
    rc=$?
    res=$(grep -m1 '^test result' "$W/dp-alone-$t.log")
    es=$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors?' "$W/dp-alone-$t.log")
    v=FAIL; [ $rc -eq 0 ] && [ "${res#test result: ok. 1 passed}" != "$res" ] && v=PASS
    step "dp-alone-$t" "$v" "$((SECONDS - s))" "memcheck, own process: rc=$rc $res; $es; $(grep -m1 -oE '(Relaxed|Global) capture during[^"]*' "$W/dp-alone-$t.log")"
done

ct=$W/capture_teardown
if ! command -v nvcc >/dev/null; then
    step capture_teardown SKIP 0 "nvcc not on PATH"
elif ! nvcc -O2 -o "$ct" "$(dirname "${BASH_SOURCE[0]}")/capture_teardown.cu" -lcuda -lpthread >"$W/ct-build.log" 2>&1; then
    step capture_teardown FAIL 0 "nvcc failed (ct-build.log)"
else
    for m in relaxed global; do
        for how in plain memcheck; do
            if [ "$(left)" -lt 20 ]; then step "ct-$m-$how" SKIP 0 "time budget spent"; continue; fi
            s=$SECONDS
            pre=(); [ "$how" = memcheck ] && pre=("${MC[@]}")
            timeout "$(cap 60)" "${pre[@]}" "$ct" "$m" >"$W/ct-$m-$how.log" 2>&1
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
