#!/usr/bin/env bash
# run23.sh: the verification call of the 2026-11-27 night session, ONE call of the device tool
# on nvidia-h100-x2 (two GPUs, so the checks that need a second device run: peer copies,
# foreign buffers, cross-device IPC, NCCL): every CUDA-touching change of the session.
#
# Bundle, here (no GPU):
#   FEATURES="cuda xstream-cuda/nccl xstream-cuda/nvrtc" bash scripts/gpu-bundle.sh
#   bash scripts/gpu-pack.sh                      # -> gpu-bundle.tar.xz (git-ignored)
# Device call: kind nvidia-h100-x2, timeout_s 600, carry ["gpu-bundle.tar.xz"], command:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/run23.sh
#
# Steps, in this order (each within what is left of BUDGET, default 480 s):
#   tests      every bundled CUDA test binary once (gpu-run.sh NO_CLI=1 NO_EXAMPLES=1), the
#              conformance suite's first whole run among them;
#   must-run   each test named in MUST_RUN (binary::test, space-separated): FAIL when it did
#              not pass or printed SKIP on this two-GPU machine;
#   examples   the CLI and every bundled example with --backend cuda;
#   gpu_ipc    bench/gpu_ipc with both configurations (consumer on device 1 included);
#   any        bench/any_dispatch's paired part;
#   launch_profile  bench/launch_profile: the launch, 4 KiB page-locked copy, event create +
#              destroy and host-callback variants timed and sampled (where the time goes:
#              xstream's code, libcuda, the rest), launch_profile.md and its offsets (15 rows);
#   gpu_ops    bench/gpu_ops: FAIL when any target row missed (how many said);
#   conf-N     whole conformance runs on CUDA until CONF_RUNS (default 5) in all;
#   memcheck   compute-sanitizer memcheck on the conformance suite (last, in the time left).
# Output in $OUT: run23-summary.tsv (step<TAB>PASS|FAIL|SKIP<TAB>seconds<TAB>detail, and a last
# line "run23<TAB>PASSED|FAILED<TAB><seconds><TAB>P pass, F fail, S skip"), run23-logs.tar.gz,
# gpu_bench.md, any_dispatch.txt. Exit status 1 when a step failed.
set -uo pipefail
# The helpers (step, cap, finish, bundle_tests, memcheck, conf_repeats...) are in lib.sh.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_run_init run23 480

machine_info
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "${ngpu:-0}" -ge 2 ] || step gpus FAIL 0 "nvidia-h100-x2 expected: ${ngpu:-0} GPU(s) visible"
need_bundle

# tests: every bundled test binary (gpu-run.sh's verdicts, one row each).
bundle_tests

# must-run: tests that need a GPU (or two) and were written this session; a SKIP here is a FAIL.
for bt in ${MUST_RUN:-}; do
    b=${bt%%::*}; tn=${bt#*::}
    if [ ! -x "$G/bin/$b" ]; then step "must $tn" FAIL 0 "$b not in the bundle"; continue; fi
    t=$SECONDS
    timeout "$(cap 90)" "$G/bin/$b" --exact "$tn" --test-threads=1 --nocapture >"$W/must-$tn.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q 'SKIP' "$W/must-$tn.log"; then
        step "must $tn" FAIL "$((SECONDS - t))" "skipped on a GPU machine: $(grep -m1 SKIP "$W/must-$tn.log")"
    elif [ $rc -eq 0 ] && grep -q '^test result: ok. 1 passed' "$W/must-$tn.log"; then
        step "must $tn" PASS "$((SECONDS - t))" "$b: passed, no SKIP printed"
    else
        step "must $tn" FAIL "$((SECONDS - t))" "rc=$rc: $(grep -m2 -E 'panicked|FAILED|signal|0 passed' "$W/must-$tn.log" | tr '\n' ' ')"
    fi
done

# examples: the CLI and every example (no test binary selected: ONLY matches none).
t=$SECONDS
OUT="$W/examples" ONLY=__no_test_binary__ BUDGET="$(cap 150)" timeout "$(cap 170)" bash $G/gpu-run.sh >"$W/examples-run.txt" 2>&1
rc=$?
while IFS= read -r line; do
    v=${line%% *}; rest=${line#* }
    case "$v" in PASS|FAIL|SKIP) step "$(cut -c1-60 <<<"$rest")" "$v" "$((SECONDS - t))" "$rest" ;; esac
done < <(grep -E '^(PASS|FAIL|SKIP) (CLI|example)' "$W/examples/summary.txt" 2>/dev/null)
grep -qE '^(PASS|FAIL) example' "$W/examples/summary.txt" 2>/dev/null ||
    step examples FAIL "$((SECONDS - t))" "gpu-run.sh ran no example (rc=$rc)"

# gpu_ipc: both configurations.
if [ ! -x "$G/bench/gpu_ipc" ]; then
    step gpu_ipc FAIL 0 "bench/gpu_ipc not in the bundle"
else
    t=$SECONDS
    OUT="$W" XSTREAM_GPU_IPC_TRACE=1 timeout "$(cap 200)" "$G/bench/gpu_ipc" >"$W/gpu_ipc.log" 2>&1
    rc=$?
    p=$(grep -c '^PASS: ' "$W/gpu_ipc.md" 2>/dev/null); m=$(grep -c '^MISS: ' "$W/gpu_ipc.md" 2>/dev/null)
    two=$(grep -c 'two GPUs: producer and buffers on device 0' "$W/gpu_ipc.md" 2>/dev/null)
    if [ $rc -ne 0 ]; then
        step gpu_ipc FAIL "$((SECONDS - t))" "rc=$rc: $(grep -m1 '^FAIL' "$W/gpu_ipc.log")"
    elif [ "${two:-0}" -eq 0 ]; then
        step gpu_ipc FAIL "$((SECONDS - t))" "the configuration with the consumer on device 1 did not report"
    elif [ "${m:-0}" -gt 0 ]; then
        step gpu_ipc FAIL "$((SECONDS - t))" "both configurations ran; ${m} of $((${p:-0} + m)) targets missed (gpu_ipc.md)"
    else
        step gpu_ipc PASS "$((SECONDS - t))" "both configurations ran; all ${p:-0} targets met (gpu_ipc.md)"
    fi
fi

# any: the erased path against the generic one (paired part only).
t=$SECONDS
OUT="$W/any" BENCH=any BUDGET="$(cap 120)" timeout "$(cap 130)" bash $G/gpu-run.sh >"$W/any-run.txt" 2>&1
line=$(grep -m1 -E '^(PASS|FAIL|SKIP) bench any_dispatch' "$W/any/summary.txt" 2>/dev/null)
v=${line%% *}
case "$v" in PASS|FAIL|SKIP) step any_dispatch "$v" "$((SECONDS - t))" "${line#* }" ;;
    *) step any_dispatch FAIL "$((SECONDS - t))" "no verdict (any-run.txt)" ;; esac
cp "$W/any/any_dispatch.txt" "$OUT/" 2>/dev/null

# launch_profile: where a launch's (a copy's, an event's, a host callback's) time goes
# (xstream's code, the driver, the rest); 15 variants.
if [ ! -x "$G/bench/launch_profile" ]; then
    step launch_profile FAIL 0 "bench/launch_profile not in the bundle"
elif [ "$(left)" -lt 60 ]; then
    step launch_profile SKIP 0 "time budget spent"
else
    t=$SECONDS
    OUT="$OUT" timeout "$(cap 90)" "$G/bench/launch_profile" >"$W/launch_profile.log" 2>&1
    rc=$?
    rows=$(grep -c '^| .*: ' "$OUT/launch_profile.md" 2>/dev/null)
    if [ $rc -eq 0 ] && [ "${rows:-0}" -ge 15 ]; then
        step launch_profile PASS "$((SECONDS - t))" "${rows} variants timed and sampled (launch_profile.md)"
    else
        step launch_profile FAIL "$((SECONDS - t))" "rc=$rc, ${rows:-0} rows: $(tail -2 "$W/launch_profile.log" | tr '\n' ' ')"
    fi
fi

# gpu_ops.
gpu_ops_step 150

# conf-N: whole conformance runs until CONF_RUNS (default 5) in all or the budget is spent
# (~25 s each).
conf_repeats "${CONF_RUNS:-5}"
# memcheck on the conformance suite (gpu-run.sh's sanitizer verdict), last, in the time left.
memcheck xstream-conformance--cuda--test "$(( $(left) - 15 ))"

finish
[ "$nf" -eq 0 ]
