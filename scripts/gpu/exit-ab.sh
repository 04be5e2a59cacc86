#!/usr/bin/env bash
# exit-ab.sh: which test makes a test binary die at exit under compute-sanitizer memcheck (the
# sanitizer's own exit handler faulting inside libcuda; see exit-trace.sh). For each test of
# the cuda and modules binaries, run alone (--exact) under memcheck ROUNDS times, leak check on
# (as gpu-run.sh runs it); then the modules binary whole with --leak-check no, ROUNDS times.
# One line per run (binary, test, round, exit status, whether segv_trace reported), then a count
# per test. Needs segv_trace.so in the repository root. Device call, one GPU:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/exit-ab.sh
# Output: $OUT/exit-ab.txt and $OUT/exit-ab-logs.tar.gz only.
# Exit status: 1 when it cannot run (segv_trace.so missing, nvcc failed); 0 once every run was
# made and recorded. A run that dies is this probe's data (counted in its output), not a failure
# of the script.
set -u
G=gpu-bundle
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib RUST_BACKTRACE=1
SO=$PWD/segv_trace.so
O=${OUT:-/tmp/exit-ab}
W=$(mktemp -d /tmp/exit-ab.XXXX)
ROUNDS=${ROUNDS:-2}
mkdir -p "$O"
[ -f "$SO" ] || { echo "FAIL: $SO missing"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date; } | tee "$O/exit-ab.txt"
SKIP_RE='^(fault_is_sticky_and_fails_pending_callbacks_once|fault_fails_callbacks_on_other_streams)$'
one() { # tag leak binary args...
    local tag=$1 leak=$2 b=$3; shift 3
    local log="$W/$tag.log"
    LD_PRELOAD=$SO timeout 120 compute-sanitizer --tool memcheck --leak-check "$leak" \
        --report-api-errors no --target-processes all --error-exitcode 99 "$G/bin/$b" --test-threads=1 "$@" >"$log" 2>&1
    local rc=$?
    echo "$tag rc=$rc segv=$(grep -c '^segv_trace: pid' "$log") $(grep -m1 '^test result' "$log" | cut -c1-40)" | tee -a "$O/exit-ab.txt"
}
for b in xstream-cuda--modules--test xstream-cuda--cuda--test; do
    for t in $("$G/bin/$b" --list 2>/dev/null | sed -n 's/: test$//p' | grep -vE "$SKIP_RE"); do
        for i in $(seq 1 "$ROUNDS"); do one "$b:$t:$i" full "$b" --exact "$t"; done
    done
done
for i in $(seq 1 "$ROUNDS"); do one "xstream-cuda--modules--test:ALL-noleak:$i" no xstream-cuda--modules--test; done
echo "tests whose process died at exit (runs of $ROUNDS):" | tee -a "$O/exit-ab.txt"
grep ' segv=[1-9]' "$O/exit-ab.txt" | cut -d: -f1-2 | sort | uniq -c | tee -a "$O/exit-ab.txt"
tar czf "$O/exit-ab-logs.tar.gz" -C "$W" .
exit 0
