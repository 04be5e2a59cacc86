#!/usr/bin/env bash
# run31.sh: the closing call of the 2026-11-28 morning session, ONE call on nvidia-h100-x2 (two
# GPUs: NCCL, peer copies, cross-device IPC): every CUDA test binary once, then every one under
# compute-sanitizer (the exit fix BackgroundHeld, the collectives' checks moved into core),
# then two probes of open questions when their binaries were carried.
#
# Bundle, here (no GPU):
#   FEATURES="cuda xstream-cuda/nccl xstream-cuda/nvrtc" bash scripts/gpu-bundle.sh
#   bash scripts/gpu-pack.sh                      # -> gpu-bundle.tar.xz (git-ignored)
# Optional probes, packed into probes.tar.xz as probes/<file>:
#   probes/data_path-settle  the data_path test binary with SETTLE_MS support (a sleep before
#                            the capture test's capture; an experiment build, not main's test);
#   probes/launch_profile    a launch_profile release build with the reused-slot variant.
# Device call: kind nvidia-h100-x2, carry ["gpu-bundle.tar.xz", "probes.tar.xz"], command:
#   tar xJf gpu-bundle.tar.xz && tar xJf probes.tar.xz && bash scripts/gpu/run31.sh
#
# Steps (within BUDGET, default 420 s):
#   tests      every bundled CUDA test binary once (gpu-run.sh NO_CLI=1 NO_EXAMPLES=1);
#   memcheck   every bundled CUDA test binary under memcheck (the modules binary also under
#              racecheck and synccheck), as run24.sh; SKIP rows once the budget is spent;
#   settle-N   probes/data_path-settle under memcheck with SETTLE_MS=500 (N=1, 2) and without
#              (N=0): PASS when its tests passed and the process exited 0 (a probe: its verdict
#              says what held, the README says what it means);
#   lp-reuse   probes/launch_profile LP_ONLY="host callback" (launch_profile.md in $OUT/lp).
# Output in $OUT: run31-summary.tsv, run31-logs.tar.gz, lp/launch_profile.md.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_run_init run31 420

machine_info
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "${ngpu:-0}" -ge 2 ] || step gpus FAIL 0 "nvidia-h100-x2 expected: ${ngpu:-0} GPU(s) visible"
need_bundle

bundle_tests

conf=xstream-conformance--cuda--test
names=()
grep -q "^$conf"$'\t' "$G/manifest.tsv" && names+=("$conf")
while IFS=$'\t' read -r name _; do
    [ -n "$name" ] && [ "$name" != "$conf" ] && names+=("$name")
done <"$G/manifest.tsv"
san_end=$((BUDGET - 40))
for b in "${names[@]}"; do
    memcheck "$b" $((san_end - SECONDS)) all
done

p=probes/data_path-settle
if [ -x "$p" ]; then
    for n in 0 1 2; do
        if [ "$(left)" -lt 25 ]; then step "settle-$n" SKIP 0 "time budget spent"; continue; fi
        t=$SECONDS
        ms=$([ "$n" -eq 0 ] && echo "" || echo 500)
        envs=(-u SETTLE_MS); [ -n "$ms" ] && envs=(SETTLE_MS="$ms")
        env "${envs[@]}" timeout "$(cap 60)" compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
            --error-exitcode 99 "$p" --test-threads=1 --skip memory_is_flat_after_100k_host_buffer_and_async_allocation_cycles \
            >"$W/settle-$n.log" 2>&1
        rc=$?
        res=$(grep -m1 '^test result' "$W/settle-$n.log")
        v=FAIL; [ $rc -eq 0 ] && [ "${res#test result: ok}" != "$res" ] && v=PASS
        step "settle-$n" "$v" "$((SECONDS - t))" "SETTLE_MS=${ms:-unset} rc=$rc $res $(grep -m1 -o 'Capture { op[^}]*}' "$W/settle-$n.log")"
    done
else
    step settle SKIP 0 "probes/data_path-settle not carried"
fi

p=probes/launch_profile
if [ -x "$p" ] && [ "$(left)" -gt 20 ]; then
    t=$SECONDS
    mkdir -p "$OUT/lp"
    LP_ONLY="host callback" OUT="$OUT/lp" timeout "$(cap 60)" "$p" >"$W/lp.txt" 2>&1
    rc=$?
    v=FAIL; [ $rc -eq 0 ] && [ -s "$OUT/lp/launch_profile.md" ] && v=PASS
    step lp-reuse "$v" "$((SECONDS - t))" "launch_profile LP_ONLY=host callback rc=$rc"
else
    step lp-reuse SKIP 0 "probes/launch_profile not carried or no time left"
fi

finish
[ "$nf" -eq 0 ]
