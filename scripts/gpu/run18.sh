#!/usr/bin/env bash
# run18.sh: the next GPU run's plan for issues 21 and 23 (written in session 7, when no device
# time was left; not run yet). Two calls of the device tool, each with the bundle unpacked:
#
#   PART=a bash scripts/gpu/run18.sh   # one GPU, about 9 minutes
#   PART=b bash scripts/gpu/run18.sh   # one GPU (two where lent), about 9 minutes
#
# Bundle (on the CPU machine):
#   FEATURES="cuda xstream-cuda/nccl xstream-cuda/nvrtc" bash scripts/gpu-bundle.sh
#   strip the executables, drop torch_bench.py, then
#   tar cf - gpu-bundle | xz -T2 -6 > target/gpu-bundle.tar.xz     (carry: that file)
#   command: tar xJf target/gpu-bundle.tar.xz && PART=a bash scripts/gpu/run18.sh
#
# Part a:
#   1. ipc_memory under memcheck in its own process (issue 21: the signal 11 at exit of runs 15
#      and 16; the CUDA reaper's exit handler of session 7 is the candidate fix). PASS needs exit
#      status 0 and every ERROR SUMMARY at 0 errors.
#   2. erased_runtime --backend cuda with the drop path's debug log (GPU runs 15 and 17 logged
#      "could not defer buffer release; leaking" at exit). PASS needs exit 0 and no "leaking".
#   3. The conformance suite on CUDA and the benches (NO_CLI=1 BENCH=1 gpu-run.sh):
#      alloc_without_host_sync (fixed in e09030a, never run on a GPU since), the allocation
#      table (expected 0.020 per launch with a buffer after the keep-list change), the launch
#      rows (the builder's +16.8% and xstream_delay's +19.8% of run 17).
# Part b: SANITIZE=1 gpu-run.sh: every bundled test binary under memcheck (issue 21's "done
#   when"), racecheck and synccheck on the builtin kernels.
#
# Everything lands in $OUT/run18<part>.tar.gz and $OUT/summary18<part>.txt; each step prints
# PASS, FAIL or SKIP with its reason, and the script exits 1 when a step failed.
set -uo pipefail
OUT="${OUT:-/tmp/out}"
PART="${PART:-a}"
R="$OUT/r18$PART"
mkdir -p "$R"
S="$R/steps.txt"
: >"$S"
fail=0
verdict() { echo "$1: $2" | tee -a "$S"; [ "$1" != FAIL ] || fail=1; }
B=gpu-bundle/bin
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } >"$R/machine.txt" 2>&1

case "$PART" in
a)
    ipc=$(ls "$B"/xstream-cuda--ipc_memory--test* 2>/dev/null | head -1)
    if [ -z "$ipc" ]; then
        verdict SKIP "ipc_memory under memcheck: the binary is not in the bundle"
    else
        timeout 240 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
            --target-processes all --error-exitcode 99 "$ipc" --test-threads=1 >"$R/ipc-memcheck.log" 2>&1
        rc=$?
        bad=$(grep "ERROR SUMMARY" "$R/ipc-memcheck.log" | grep -vc "ERROR SUMMARY: 0 errors")
        n=$(grep -c "ERROR SUMMARY" "$R/ipc-memcheck.log")
        if [ "$rc" = 0 ] && [ "$n" -gt 0 ] && [ "$bad" = 0 ] && grep -q "test result: ok" "$R/ipc-memcheck.log"; then
            verdict PASS "ipc_memory under memcheck: exit 0, $n ERROR SUMMARY lines at 0 errors"
        else
            verdict FAIL "ipc_memory under memcheck: exit $rc, $bad of $n ERROR SUMMARY lines not at 0 (ipc-memcheck.log)"
        fi
    fi
    ex=gpu-bundle/bin/examples/erased_runtime
    if [ ! -x "$ex" ]; then
        verdict SKIP "erased_runtime: not in the bundle"
    else
        RUST_LOG=xstream_cuda::stream::drop=debug timeout 60 "$ex" --backend cuda >"$R/erased.log" 2>&1
        rc=$?
        if [ "$rc" = 0 ] && ! grep -q "leaking" "$R/erased.log"; then
            verdict PASS "erased_runtime --backend cuda: exit 0, no leaked release"
        else
            verdict FAIL "erased_runtime --backend cuda: exit $rc, $(grep -c leaking "$R/erased.log") leaking lines (erased.log)"
        fi
    fi
    OUT="$R" NO_CLI=1 BENCH=1 BUDGET=300 timeout 330 bash gpu-bundle/gpu-run.sh >"$R/run.txt" 2>&1
    rc=$?
    [ "$rc" = 0 ] && verdict PASS "gpu-run.sh NO_CLI=1 BENCH=1 (run.txt, summary.txt)" \
        || verdict FAIL "gpu-run.sh NO_CLI=1 BENCH=1 exited $rc (run.txt, summary.txt)"
    ;;
b)
    OUT="$R" SANITIZE=1 BUDGET=540 timeout 570 bash gpu-bundle/gpu-run.sh >"$R/run.txt" 2>&1
    rc=$?
    [ "$rc" = 0 ] && verdict PASS "gpu-run.sh SANITIZE=1 (run.txt, summary.txt, sanitizer.log)" \
        || verdict FAIL "gpu-run.sh SANITIZE=1 exited $rc (run.txt, summary.txt, sanitizer.log)"
    ;;
*)
    verdict FAIL "unknown PART=$PART (a or b)"
    ;;
esac
{ cat "$S"; echo; cat "$R/summary.txt" 2>/dev/null; } >"$OUT/summary18$PART.txt"
tar czf "$OUT/run18$PART.tar.gz" -C "$OUT" "r18$PART"
cat "$OUT/summary18$PART.txt"
exit "$fail"
