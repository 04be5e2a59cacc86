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
#   launch_profile  bench/launch_profile: the launch variants timed and sampled (where the time
#              goes: xstream's code, libcuda, the rest), launch_profile.md and its offsets;
#   gpu_ops    bench/gpu_ops: FAIL when any target row missed (how many said);
#   conf-N     whole conformance runs on CUDA until CONF_RUNS (default 5) in all;
#   memcheck   compute-sanitizer memcheck on the conformance suite (last, in the time left).
# Output in $OUT: run23-summary.tsv (step<TAB>PASS|FAIL|SKIP<TAB>seconds<TAB>detail, and a last
# line "run23<TAB>PASSED|FAILED<TAB><seconds><TAB>P pass, F fail, S skip"), run23-logs.tar.gz,
# gpu_bench.md, any_dispatch.txt. Exit status 1 when a step failed.
set -uo pipefail
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
W=$(mktemp -d /tmp/run23.XXXX)
TSV="$OUT/run23-summary.tsv"
: >"$TSV"
BUDGET="${BUDGET:-480}"
G=gpu-bundle
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1 NCCL_NVLS_ENABLE=0
np=0; nf=0; ns=0
step() { # name verdict seconds detail
    case "$2" in PASS) np=$((np + 1)) ;; FAIL) nf=$((nf + 1)) ;; *) ns=$((ns + 1)) ;; esac
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(tr '\t\n' '  ' <<<"$4" | head -c 400)" | tee -a "$TSV"
}
left() { echo $((BUDGET - SECONDS)); }
# cap WANT: WANT seconds, cut to the time left less 10 (at least 1).
cap() { local l=$(( $(left) - 10 )); [ "$l" -ge 1 ] || l=1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
pack() {
    tar czf "$OUT/run23-logs.tar.gz" -C "$W" . 2>/dev/null
}
finish() {
    local word=PASSED
    [ "$nf" -eq 0 ] || word=FAILED
    printf 'run23\t%s\t%s\t%s pass, %s fail, %s skip\n' "$word" "$SECONDS" "$np" "$nf" "$ns" | tee -a "$TSV"
    pack
}
trap 'finish; exit 1' TERM INT

{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  command -v compute-sanitizer && compute-sanitizer --version | tail -1; } >"$W/machine.txt" 2>&1
cat "$W/machine.txt"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "${ngpu:-0}" -ge 2 ] || step gpus FAIL 0 "nvidia-h100-x2 expected: ${ngpu:-0} GPU(s) visible"
if [ ! -f "$G/manifest.tsv" ]; then
    step bundle FAIL 0 "$G/manifest.tsv missing: unpack gpu-bundle.tar.xz first"
    finish; exit 1
fi

# tests: every bundled test binary (gpu-run.sh's verdicts, one row each).
t=$SECONDS
OUT="$W/tests" NO_CLI=1 NO_EXAMPLES=1 BUDGET=170 timeout 190 bash $G/gpu-run.sh >"$W/tests-run.txt" 2>&1
rc=$?
while IFS= read -r line; do
    v=${line%% *}; rest=${line#* }
    case "$v" in PASS|FAIL|SKIP) step "test $(awk '{print $1}' <<<"$rest")" "$v" "$((SECONDS - t))" "$rest" ;; esac
done < <(grep -E '^(PASS|FAIL|SKIP) ' "$W/tests/summary.txt" 2>/dev/null)
[ -s "$W/tests/summary.txt" ] || step tests FAIL "$((SECONDS - t))" "gpu-run.sh wrote no summary (rc=$rc)"
conf_runs=0; conf_pass=0
if [ -f "$W/tests/tests.log" ] && grep -q '^===== xstream-conformance--cuda--test' "$W/tests/tests.log"; then
    conf_runs=1
    sed -n '/^===== xstream-conformance--cuda--test/,/^===== /p' "$W/tests/tests.log" >"$W/conf-cuda-1.log"
    grep -q '^PASS xstream-conformance--cuda--test' "$W/tests/summary.txt" && conf_pass=1
fi

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

# launch_profile: where a launch's time goes (xstream's code, the driver, the rest).
if [ ! -x "$G/bench/launch_profile" ]; then
    step launch_profile FAIL 0 "bench/launch_profile not in the bundle"
elif [ "$(left)" -lt 60 ]; then
    step launch_profile SKIP 0 "time budget spent"
else
    t=$SECONDS
    OUT="$OUT" timeout "$(cap 90)" "$G/bench/launch_profile" >"$W/launch_profile.log" 2>&1
    rc=$?
    rows=$(grep -c '^| .*: ' "$OUT/launch_profile.md" 2>/dev/null)
    if [ $rc -eq 0 ] && [ "${rows:-0}" -ge 7 ]; then
        step launch_profile PASS "$((SECONDS - t))" "${rows} variants timed and sampled (launch_profile.md)"
    else
        step launch_profile FAIL "$((SECONDS - t))" "rc=$rc, ${rows:-0} rows: $(tail -2 "$W/launch_profile.log" | tr '\n' ' ')"
    fi
fi

# gpu_ops.
if [ ! -x "$G/bench/gpu_ops" ]; then
    step gpu_ops FAIL 0 "bench/gpu_ops not in the bundle"
elif [ "$(left)" -lt 60 ]; then
    step gpu_ops SKIP 0 "time budget spent"
else
    t=$SECONDS
    OUT="$W" timeout "$(cap 150)" "$G/bench/gpu_ops" >"$W/gpu_ops.log" 2>&1
    cp "$W/gpu_bench.md" "$OUT/" 2>/dev/null
    rc=$?
    f=$(grep -cE '(\| FAIL|: FAIL)' "$W/gpu_bench.md" 2>/dev/null)
    n=$(grep -cE '(\| (PASS|FAIL)|: (PASS|FAIL))' "$W/gpu_bench.md" 2>/dev/null)
    if [ $rc -ne 0 ] || [ "${n:-0}" -eq 0 ]; then
        step gpu_ops FAIL "$((SECONDS - t))" "rc=$rc, ${n:-0} target rows in gpu_bench.md"
    elif [ "${f:-0}" -gt 0 ]; then
        step gpu_ops FAIL "$((SECONDS - t))" "${f} of ${n} target rows missed (gpu_bench.md)"
    else
        step gpu_ops PASS "$((SECONDS - t))" "all ${n} target rows met (gpu_bench.md)"
    fi
fi

# memcheck on the binaries this round touched (gpu-run.sh's sanitizer verdicts); the
# conformance suite's memcheck runs last, after the repeats, in the time left.
memcheck() { # binary cap
    local b="$1" c="$2" t line v
    if [ "$c" -lt 40 ]; then step "memcheck $b" SKIP 0 "time budget spent (the repeats come first)"; return; fi
    t=$SECONDS
    OUT="$W/san-$b" SANITIZE="$b" BUDGET="$c" timeout $((c + 10)) bash $G/gpu-run.sh >"$W/san-$b.txt" 2>&1
    line=$(grep -m1 -E '^(PASS|FAIL|SKIP) ' "$W/san-$b/summary.txt" 2>/dev/null)
    v=${line%% *}
    case "$v" in PASS|FAIL|SKIP) step "memcheck $b" "$v" "$((SECONDS - t))" "${line#* }" ;;
        *) step "memcheck $b" FAIL "$((SECONDS - t))" "no verdict (san-$b.txt)" ;; esac
}

# conf-N: whole conformance runs until CONF_RUNS (default 5) in all or the budget is spent
# (~25 s each).
bin=$G/bin/xstream-conformance--cuda--test
while [ -x "$bin" ] && [ "$conf_runs" -lt "${CONF_RUNS:-5}" ] && [ "$(left)" -gt 35 ]; do
    conf_runs=$((conf_runs + 1))
    t=$SECONDS
    timeout 60 "$bin" --test-threads=1 --nocapture >"$W/conf-cuda-$conf_runs.log" 2>&1
    rc=$?
    ep=$(grep -m1 -E '^(PASS|FAIL) event_pool_bounded' "$W/conf-cuda-$conf_runs.log" | awk '{print $1, $3, $4}')
    if [ $rc -eq 0 ] && grep -q '^test result: ok' "$W/conf-cuda-$conf_runs.log"; then
        conf_pass=$((conf_pass + 1))
        step "conf-$conf_runs" PASS "$((SECONDS - t))" "whole suite on CUDA; event_pool_bounded: $ep"
    else
        step "conf-$conf_runs" FAIL "$((SECONDS - t))" "rc=$rc; $(grep -E '^FAIL ' "$W/conf-cuda-$conf_runs.log" | head -3 | tr '\n' ';')"
    fi
done
want=${CONF_RUNS:-5}
if [ "$conf_runs" -eq "$want" ] && [ "$conf_pass" -eq "$want" ]; then
    step conformance-repeats PASS 0 "$want of $want whole runs passed"
else
    step conformance-repeats FAIL 0 "$conf_pass of $conf_runs whole runs passed (target $want of $want)"
fi
memcheck xstream-conformance--cuda--test "$(( $(left) - 15 ))"

finish
[ "$nf" -eq 0 ]
