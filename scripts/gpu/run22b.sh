#!/usr/bin/env bash
# run22b.sh: the follow-up call to run 22 (nvidia-h100-x1, about 2 minutes): the two test
# binaries that failed there re-run after their fixes (a test that matched CUDA's not-ready
# code by its old variant; the bundle's stale null-driver double), and the exit crash of the
# conformance binary under memcheck narrowed down: which test of the binary, and which checks
# of the suite (through `xstream conform --filter`), end the process with a signal under
# memcheck. Each step prints one line: name<TAB>rc<TAB>what the log ends with.
# Call: kind nvidia-h100-x1, carry ["gpu-bundle.tar.xz"], command:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/run22b.sh
set -uo pipefail
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
W=$(mktemp -d /tmp/run22b.XXXX)
G=gpu-bundle
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1 NCCL_NVLS_ENABLE=0
TSV="$OUT/run22b-summary.tsv"; : >"$TSV"
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } >"$W/machine.txt" 2>&1
row() { printf '%s\t%s\t%s\n' "$1" "$2" "$(tail -c 300 "$3" | tr '\t\n' '  ')" | tee -a "$TSV"; }
for b in xstream-cuda--cuda--test xstream-cuda--null_driver--test; do
    timeout 120 "$G/bin/$b" --test-threads=1 >"$W/$b.log" 2>&1; row "$b" $? "$W/$b.log"
done
SAN=(compute-sanitizer --tool memcheck --leak-check full --report-api-errors no)
C=$G/bin/xstream-conformance--cuda--test
for t in cuda record_use_covers_raw_handle_work_on_cuda; do
    timeout 120 "${SAN[@]}" "$C" --exact "$t" --test-threads=1 >"$W/san-test-$t.log" 2>&1
    row "memcheck test $t" $? "$W/san-test-$t.log"
done
for f in vmm resource_limits event ordering capture callback stream alloc; do
    timeout 60 "${SAN[@]}" "$G/bin/xstream" conform --backend cuda --filter "$f" >"$W/san-conform-$f.log" 2>&1
    row "memcheck conform --filter $f" $? "$W/san-conform-$f.log"
done
tar czf "$OUT/run22b-logs.tar.gz" -C "$W" .
