#!/usr/bin/env bash
# run20.sh: the second device call of 2026-11-27 (nvidia-h100-x2, about 4 minutes): what
# changed after run 19 (b807261), on two GPUs.
#
# Bundle, here: FEATURES="cuda xstream-cuda/nccl xstream-cuda/nvrtc" bash scripts/gpu-bundle.sh
#               bash scripts/gpu-pack.sh
# Call: kind nvidia-h100-x2, carry ["gpu-bundle.tar.xz"], command:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/run20.sh
#
# Steps:
#   conformance  the conformance suite on CUDA, whole, twice (the resource_limits check is new:
#                4096 streams and 65537 events on a device that reports no limit);
#   null-driver  the null driver test with its double now carried in the bundle (run 19: FAIL,
#                the double was missing);
#   tensor       the tensor example on CUDA: its "verified:" line with every check verified;
#   mpi-dp       the data-parallel example on 2 GPUs started with only Open MPI's variables
#                (rank 0's address from XSTREAM_MASTER_ADDR).
# Output: $OUT/run20-summary.tsv (step<TAB>PASS|FAIL|SKIP<TAB>seconds<TAB>detail, and a last
# line "run20<TAB>PASSED|FAILED<TAB>seconds<TAB>counts"), $OUT/run20-logs.tar.gz. Exit 1 when a
# step failed.
set -uo pipefail
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
W=$(mktemp -d /tmp/run20.XXXX)
TSV="$OUT/run20-summary.tsv"
: >"$TSV"
G=gpu-bundle
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1 NCCL_NVLS_ENABLE=0
np=0; nf=0; ns=0
step() { # name verdict seconds detail
    case "$2" in PASS) np=$((np + 1)) ;; FAIL) nf=$((nf + 1)) ;; *) ns=$((ns + 1)) ;; esac
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(tr '\t\n' '  ' <<<"$4" | head -c 400)" | tee -a "$TSV"
}
finish() {
    local word=PASSED
    [ "$nf" -eq 0 ] || word=FAILED
    printf 'run20\t%s\t%s\t%s pass, %s fail, %s skip\n' "$word" "$SECONDS" "$np" "$nf" "$ns" | tee -a "$TSV"
    tar czf "$OUT/run20-logs.tar.gz" -C "$W" . 2>/dev/null
}

{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } \
    >"$W/machine.txt" 2>&1
cat "$W/machine.txt"

bin=$G/bin/xstream-conformance--cuda--test
for i in 1 2; do
    t=$SECONDS
    if [ ! -x "$bin" ]; then step "conformance-$i" FAIL 0 "$bin not in the bundle"; continue; fi
    timeout 240 "$bin" --test-threads=1 --nocapture >"$W/conf-cuda-$i.log" 2>&1
    rc=$?
    rl=$(grep -m1 -E '^(PASS|FAIL) resource_limits' "$W/conf-cuda-$i.log" | head -c 300)
    if [ $rc -eq 0 ] && grep -q '^test result: ok' "$W/conf-cuda-$i.log"; then
        step "conformance-$i" PASS "$((SECONDS - t))" "whole suite on CUDA; $rl"
    else
        step "conformance-$i" FAIL "$((SECONDS - t))" "rc=$rc; $(grep -E '^FAIL ' "$W/conf-cuda-$i.log" | head -3 | tr '\n' ';')"
    fi
done

bin=$G/bin/xstream-cuda--null_driver--test
t=$SECONDS
if [ ! -x "$bin" ]; then
    step null-driver FAIL 0 "$bin not in the bundle"
else
    timeout 120 "$bin" --test-threads=1 >"$W/null-driver.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^test result: ok' "$W/null-driver.log"; then
        step null-driver PASS "$((SECONDS - t))" "$(grep -m1 '^test result' "$W/null-driver.log")"
    else
        step null-driver FAIL "$((SECONDS - t))" "rc=$rc: $(grep -m1 -E 'panicked|FAILED' "$W/null-driver.log")"
    fi
fi

ex=$G/bin/examples/tensor
t=$SECONDS
if [ ! -x "$ex" ]; then
    step tensor FAIL 0 "bin/examples/tensor not in the bundle"
else
    timeout 120 "$ex" --backend cuda >"$W/tensor.txt" 2>&1
    rc=$?
    line=$(grep -m1 '^verified: ' "$W/tensor.txt")
    if [ $rc -eq 0 ] && [ "$line" = "verified: 6 of 6 tensor checks match the host reference (0 skipped)" ]; then
        step tensor PASS "$((SECONDS - t))" "$line; $(grep -m1 '^allocator: ' "$W/tensor.txt")"
    else
        step tensor FAIL "$((SECONDS - t))" "rc=$rc: ${line:-$(tail -1 "$W/tensor.txt")}"
    fi
fi

DP=$G/bin/examples/data-parallel-allreduce
t=$SECONDS
if [ ! -x "$DP" ]; then
    step mpi-dp FAIL 0 "bin/examples/data-parallel-allreduce not in the bundle"
else
    M=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT OMPI_COMM_WORLD_SIZE=2
       XSTREAM_MASTER_ADDR=127.0.0.1 XSTREAM_RENDEZVOUS_PORT=29611 XSTREAM_JOB_ID=run20
       XSTREAM_RENDEZVOUS_TIMEOUT_MS=60000)
    pids=()
    for r in 0 1; do
        "${M[@]}" OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_LOCAL_RANK=$r timeout 90 "$DP" --backend cuda --steps 5 \
            >"$W/mpi-dp.rank$r.txt" 2>&1 &
        pids+=($!)
    done
    rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    ok=$(cat "$W"/mpi-dp.rank*.txt | grep -c '^data-parallel all-reduce OK')
    if [ $rc -eq 0 ] && [ "${ok:-0}" -eq 2 ]; then
        step mpi-dp PASS "$((SECONDS - t))" "2 ranks under Open MPI variables on 2 GPUs: both OK"
    else
        step mpi-dp FAIL "$((SECONDS - t))" "rc=$rc, $ok of 2 ranks OK: $(grep -h -m1 -iE 'error|panick' "$W"/mpi-dp.rank*.txt | head -2)"
    fi
fi

finish
[ "$nf" -eq 0 ]
