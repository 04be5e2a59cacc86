#!/usr/bin/env bash
# run19.sh: issue 29's verification run, ONE call of the device tool on nvidia-h100-x2 (two GPUs;
# about 9 minutes). Not run yet (written with the changes it checks).
#
# Bundle, here (no GPU):
#   FEATURES="cuda xstream-cuda/nccl xstream-cuda/nvrtc" bash scripts/gpu-bundle.sh
#   bash scripts/gpu-pack.sh                      # -> gpu-bundle.tar.xz (git-ignored)
# Device call: kind nvidia-h100-x2, timeout_s 600, carry ["gpu-bundle.tar.xz"], command:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/run19.sh
#
# Steps, in this order (each within what is left of BUDGET, default 540 s):
#   tests      every bundled CUDA test binary once (gpu-run.sh NO_CLI=1 NO_EXAMPLES=1): the new
#              ipc_memory test cuda_ipc_an_importer_on_another_device_reads_and_answers (an
#              importer working on device 1), the null-driver binaries, and conformance run 1;
#   ipc-test   that ipc_memory test alone, its child's exit status checked (a SIGSEGV before the
#              bridge of bd134e8);
#   gpu_ipc    bench/gpu_ipc with both configurations, "consumer on device 1" included, with its
#              step trace (XSTREAM_GPU_IPC_TRACE=1): FAIL when it did not finish or any target
#              missed (how many said);
#   gpu_ops    bench/gpu_ops: FAIL when any target row missed (how many said);
#   memcheck   compute-sanitizer memcheck on the binaries this round touched: ipc_memory and
#              ipc_events (the cross-device wait) here, the conformance suite (the stream drop)
#              last, in the time the repeats leave (SKIP with the reason when none);
#   conf-N     the conformance suite on CUDA, whole runs repeated while time is left, until
#              10 whole runs in all (run 1 is the tests step's): the flake of
#              event_pool_bounded (2 of 3 runs failed on 2026-11-27 before 5ee3504; 10 of 10
#              passed after it in docs/gpu-runs/2026-11-27-2xh100-run19a).
# Output in $OUT (the device tool returns at most 8 files, so logs travel in one archive):
#   run19-summary.tsv  one line per step: step<TAB>PASS|FAIL|SKIP<TAB>seconds<TAB>detail, and a
#                      last line "run19<TAB>PASSED|FAILED<TAB><seconds><TAB>P pass, F fail, S skip"
#   run19-logs.tar.gz  every log (tests.log, summary.txt of each gpu-run.sh call, gpu_ipc.log,
#                      gpu_ipc.md, gpu_bench.md, sanitizer logs, conf-cuda-N.log, machine.txt)
# Exit status 1 when a step failed.
set -uo pipefail
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
W=$(mktemp -d /tmp/run19.XXXX)
TSV="$OUT/run19-summary.tsv"
: >"$TSV"
BUDGET="${BUDGET:-540}"
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
    tar czf "$OUT/run19-logs.tar.gz" -C "$W" . 2>/dev/null
}
finish() {
    local word=PASSED
    [ "$nf" -eq 0 ] || word=FAILED
    printf 'run19\t%s\t%s\t%s pass, %s fail, %s skip\n' "$word" "$SECONDS" "$np" "$nf" "$ns" | tee -a "$TSV"
    pack
}
trap 'finish; exit 1' TERM INT

{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  command -v compute-sanitizer && compute-sanitizer --version | tail -1; } >"$W/machine.txt" 2>&1
cat "$W/machine.txt"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "${ngpu:-0}" -ge 2 ] || step gpus FAIL 0 "nvidia-h100-x2 expected: $ngpu GPU(s) visible"
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

# ipc-test: the importer on device 1, alone.
bin=$G/bin/xstream-cuda--ipc_memory--test
T=cuda_ipc_an_importer_on_another_device_reads_and_answers
if [ ! -x "$bin" ]; then
    step ipc-test FAIL 0 "$bin not in the bundle"
else
    t=$SECONDS
    timeout "$(cap 90)" "$bin" --exact "$T" --test-threads=1 --nocapture >"$W/ipc-test.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "SKIP: $T" "$W/ipc-test.log"; then
        step ipc-test FAIL "$((SECONDS - t))" "skipped on a two-GPU machine: $(grep -m1 "SKIP: $T" "$W/ipc-test.log")"
    elif [ $rc -eq 0 ] && grep -q '^test result: ok. 1 passed' "$W/ipc-test.log"; then
        step ipc-test PASS "$((SECONDS - t))" "$T: the importer on device 1 read, answered and exited 0"
    else
        step ipc-test FAIL "$((SECONDS - t))" "$T rc=$rc: $(grep -m1 -E 'panicked|SIGSEGV|signal' "$W/ipc-test.log")"
    fi
fi

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

# gpu_ops.
if [ ! -x "$G/bench/gpu_ops" ]; then
    step gpu_ops FAIL 0 "bench/gpu_ops not in the bundle"
elif [ "$(left)" -lt 60 ]; then
    step gpu_ops SKIP 0 "time budget spent"
else
    t=$SECONDS
    OUT="$W" timeout "$(cap 150)" "$G/bench/gpu_ops" >"$W/gpu_ops.log" 2>&1
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

# srun: the data-parallel example on 2 GPUs started as Slurm starts a job step (issue 32): two
# processes with only Slurm's variables (no torchrun ones), rank 0 found on the node list's
# first host, the port derived from the job id; `xstream bootstrap` says what it found.
DP=$G/bin/examples/data-parallel-allreduce
if [ ! -x "$DP" ]; then
    step srun-dp FAIL 0 "bin/examples/data-parallel-allreduce not in the bundle"
elif [ "$(left)" -lt 60 ]; then
    step srun-dp SKIP 0 "time budget spent"
else
    t=$SECONDS
    S=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT SLURM_NTASKS=2
       SLURM_JOB_ID=4242 SLURM_STEP_ID=1 SLURM_JOB_NODELIST=localhost XSTREAM_RENDEZVOUS_TIMEOUT_MS=60000)
    [ -x "$G/bin/xstream" ] && "${S[@]}" SLURM_PROCID=0 SLURM_LOCALID=0 "$G/bin/xstream" bootstrap >"$W/srun-bootstrap.txt" 2>&1
    pids=()
    for r in 0 1; do
        "${S[@]}" SLURM_PROCID=$r SLURM_LOCALID=$r timeout "$(cap 90)" "$DP" --backend cuda --steps 5 \
            >"$W/srun-dp.rank$r.txt" 2>&1 &
        pids+=($!)
    done
    rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    ok=$(cat "$W"/srun-dp.rank*.txt | grep -c '^data-parallel all-reduce OK')
    if [ $rc -eq 0 ] && [ "${ok:-0}" -eq 2 ]; then
        step srun-dp PASS "$((SECONDS - t))" "2 ranks under Slurm variables on 2 GPUs: both OK ($(head -c 200 "$W/srun-bootstrap.txt" 2>/dev/null | tr '\n' ' '))"
    else
        step srun-dp FAIL "$((SECONDS - t))" "rc=$rc, $ok of 2 ranks OK: $(grep -h -m1 -iE 'error|panick' "$W"/srun-dp.rank*.txt | head -2)"
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
memcheck xstream-cuda--ipc_memory--test "$(cap 80)"
memcheck xstream-cuda--ipc_events--test "$(cap 80)"

# conf-N: whole conformance runs until 10 in all or the budget is spent (~25 s each).
bin=$G/bin/xstream-conformance--cuda--test
while [ -x "$bin" ] && [ "$conf_runs" -lt 10 ] && [ "$(left)" -gt 35 ]; do
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
if [ "$conf_runs" -eq 10 ] && [ "$conf_pass" -eq 10 ]; then
    step conformance-repeats PASS 0 "10 of 10 whole runs passed"
else
    step conformance-repeats FAIL 0 "$conf_pass of $conf_runs whole runs passed (target 10 of 10)"
fi
memcheck xstream-conformance--cuda--test "$(( $(left) - 15 ))"

finish
[ "$nf" -eq 0 ]
