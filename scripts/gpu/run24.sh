#!/usr/bin/env bash
# run24.sh: the device call written after run 23, ONE call of the device tool, on one
# GPU or two (nothing here needs a second one): the sanitizer over every CUDA test binary, the
# conformance repeats, and the expandable allocator on the GPU (issue 28).
#
# Bundle, here (no GPU):
#   FEATURES="cuda xstream-cuda/nccl xstream-cuda/nvrtc" bash scripts/gpu-bundle.sh
#   bash scripts/gpu-pack.sh                      # -> gpu-bundle.tar.xz (git-ignored)
# Device call: timeout_s 600, carry ["gpu-bundle.tar.xz"], command:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/run24.sh
#
# Steps, in this order, within BUDGET (default 540 s):
#   memcheck   every bundled CUDA test binary under compute-sanitizer memcheck (gpu-run.sh
#              SANITIZE=<binary>: its leak check, its skips and reasons; the modules binary also
#              under racecheck and synccheck), the conformance suite first; a binary that loads
#              no CUDA (the null-driver ones) is a SKIP with gpu-run.sh's reason; one row per
#              verdict. This step stops early enough to leave 30 s per conformance repeat;
#              binaries it cannot start then are SKIP rows ("time budget spent");
#   conf-N     CONF_RUNS (default 5) whole conformance runs on CUDA, then the row
#              conformance-repeats (PASS only when all CONF_RUNS passed);
#   expandable bin/examples/expandable --backend cuda (only with 60 s left): PASS when it
#              verified its blocks and met its peak-reserved target (issue 28);
#   gpu_ops    bench/gpu_ops (only with 60 s left), its expandable-allocator rows among the
#              others: PASS when every target row met its target.
# Output in $OUT: run24-summary.tsv (step<TAB>PASS|FAIL|SKIP<TAB>seconds<TAB>detail, and a last
# line "run24<TAB>PASSED|FAILED<TAB><seconds><TAB>P pass, F fail, S skip"), run24-logs.tar.gz
# (the sanitizer logs under san-*/), gpu_bench.md, expandable.txt. Exit status 1 when a step
# failed.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_run_init run24 540
CONF_RUNS="${CONF_RUNS:-5}"

machine_info
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "${ngpu:-0}" -ge 1 ] || step gpus FAIL 0 "no GPU visible"
need_bundle

# memcheck: the conformance suite first, then the manifest's order.
san_end=$((BUDGET - 30 * CONF_RUNS))
conf=xstream-conformance--cuda--test
names=()
grep -q "^$conf"$'\t' "$G/manifest.tsv" && names+=("$conf")
while IFS=$'\t' read -r name _; do
    [ -n "$name" ] && [ "$name" != "$conf" ] && names+=("$name")
done <"$G/manifest.tsv"
[ "${#names[@]}" -gt 0 ] || step memcheck FAIL 0 "no test binary in $G/manifest.tsv"
for b in "${names[@]}"; do
    memcheck "$b" $((san_end - SECONDS)) all
done

# conf-N: the whole suite, CONF_RUNS times.
conf_runs=0; conf_pass=0
[ -x "$G/bin/$conf" ] || step conf FAIL 0 "bin/$conf not in the bundle"
conf_repeats "$CONF_RUNS"

# expandable: the allocator example on the GPU.
ex=$G/bin/examples/expandable
if [ ! -x "$ex" ]; then
    step expandable FAIL 0 "bin/examples/expandable not in the bundle"
elif [ "$(left)" -lt 60 ]; then
    step expandable SKIP 0 "time budget spent"
else
    t=$SECONDS
    timeout "$(cap 90)" "$ex" --backend cuda >"$W/expandable.txt" 2>&1
    rc=$?
    cp "$W/expandable.txt" "$OUT/" 2>/dev/null
    seg=$(grep -m1 '^expandable segment: ' "$W/expandable.txt")
    if [ $rc -eq 0 ] && grep -q '^verified: ' "$W/expandable.txt" && grep -q '^target .*: met$' "$W/expandable.txt"; then
        step expandable PASS "$((SECONDS - t))" "blocks verified, peak-reserved target met; $seg"
    else
        step expandable FAIL "$((SECONDS - t))" "rc=$rc: $(grep -m2 -E '^(target|verified|error)' "$W/expandable.txt" | tr '\n' ' ') $seg"
    fi
fi

# gpu_ops: every row, the expandable allocator's hot path among them.
gpu_ops_step 150

finish
[ "$nf" -eq 0 ]
