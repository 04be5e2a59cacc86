#!/usr/bin/env bash
# exit-memcheck.sh: compute-sanitizer memcheck on the CUDA conformance suite, N times for each
# of two bundles, alternating (A, B, A, B, ...), one verdict line per run. Written for the exit
# of the suite's process under memcheck (run 28 saw it end with signal 11 after every test had
# passed, "process didn't terminate successfully"): A is a bundle before a change, B after it.
#
# Device call (one GPU is enough), both bundles carried:
#   mkdir A B && tar xJf gpu-bundle-old.tar.xz -C A && tar xJf gpu-bundle.tar.xz -C B && \
#     bash scripts/gpu/exit-memcheck.sh A/gpu-bundle B/gpu-bundle 4
# Output: $OUT/exit-memcheck.txt (one line per run: side, round, gpu-run.sh's exit status and
# its memcheck verdict line) and $OUT/exit-memcheck-logs.tar.gz (every run's files).
# Exit status 0 only when every run's memcheck verdict was PASS; 1 when any run failed or
# printed no verdict.
set -uo pipefail
A=$1
B=$2
N=${3:-4}
OUTD=${OUT:-/tmp/exit-memcheck}
W=$(mktemp -d /tmp/exit-memcheck.XXXX)
mkdir -p "$OUTD"
: >"$OUTD/exit-memcheck.txt"
for i in $(seq 1 "$N"); do
    for side in A B; do
        d=${!side}
        o="$W/$side-$i"
        mkdir -p "$o"
        OUT="$o" SANITIZE=xstream-conformance--cuda--test BUDGET=110 timeout 130 bash "$d/gpu-run.sh" >"$o/run.txt" 2>&1
        rc=$?
        line=$(grep -m1 -E '^(PASS|FAIL) memcheck' "$o/summary.txt" 2>/dev/null | cut -c1-220)
        echo "$side $i rc=$rc ${line:-no memcheck verdict line}" | tee -a "$OUTD/exit-memcheck.txt"
    done
done
tar czf "$OUTD/exit-memcheck-logs.tar.gz" -C "$W" .
pa=$(grep -c '^A .* PASS memcheck' "$OUTD/exit-memcheck.txt")
pb=$(grep -c '^B .* PASS memcheck' "$OUTD/exit-memcheck.txt")
echo "A: $pa of $N PASS; B: $pb of $N PASS" | tee -a "$OUTD/exit-memcheck.txt"
[ "$pa" -eq "$N" ] && [ "$pb" -eq "$N" ]
