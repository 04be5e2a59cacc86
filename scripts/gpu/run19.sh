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
# The helpers (step, cap, finish, bundle_tests, memcheck, conf_repeats...) are in lib.sh.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_run_init run19 540

machine_info
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "${ngpu:-0}" -ge 2 ] || step gpus FAIL 0 "nvidia-h100-x2 expected: $ngpu GPU(s) visible"
need_bundle

# tests: every bundled test binary (gpu-run.sh's verdicts, one row each).
bundle_tests

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
memcheck xstream-cuda--ipc_memory--test "$(cap 80)"
memcheck xstream-cuda--ipc_events--test "$(cap 80)"

# conf-N: whole conformance runs until 10 in all or the budget is spent (~25 s each).
conf_repeats 10
memcheck xstream-conformance--cuda--test "$(( $(left) - 15 ))"

finish
[ "$nf" -eq 0 ]
