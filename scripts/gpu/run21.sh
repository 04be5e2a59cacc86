#!/usr/bin/env bash
# run21.sh: one device call (nvidia-h100-x2, under 5 minutes) for issue 29's hot-path rows
# after this round's CUDA changes: the CUDA test binaries, then the benches (gpu_ops, gpu_ipc
# with both configurations and its `diag:` lines, any_dispatch), through scripts/gpu-run.sh.
#
# Bundle, here: FEATURES="cuda xstream-cuda/nccl xstream-cuda/nvrtc" bash scripts/gpu-bundle.sh
#               bash scripts/gpu-pack.sh
# Call: kind nvidia-h100-x2, carry ["gpu-bundle.tar.xz"], command:
#   tar xJf gpu-bundle.tar.xz && bash scripts/gpu/run21.sh
#
# gpu-run.sh runs with ONLY=cuda-- (the xstream-cuda test binaries and the conformance suite
# on CUDA), NO_CLI=1 NO_EXAMPLES=1 BENCH=1, BUDGET=250 (its steps are cut to what is left).
# Output in $OUT: machine.txt (date, nvidia-smi), gpu-run/ (gpu-run.sh's files: summary.txt,
# tests.log, gpu_bench.md, gpu_bench.json, gpu_ipc.md, gpu_ipc.log, any_dispatch.txt), and
# run21-summary.tsv: one line per gpu-run.sh verdict, step<TAB>verdict<TAB>seconds<TAB>detail
# (seconds as the verdict states them, else 0), then "run21<TAB>PASSED|FAILED<TAB>seconds<TAB>
# counts". Exit status: gpu-run.sh's.
set -uo pipefail
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT/gpu-run"
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } \
    >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
# The PyTorch comparison is not part of this call (gpu-run.sh then says SKIP: not in the bundle).
rm -f gpu-bundle/torch_bench.py
OUT="$OUT/gpu-run" BUDGET=250 ONLY=cuda-- NO_CLI=1 NO_EXAMPLES=1 BENCH=1 bash gpu-bundle/gpu-run.sh
rc=$?
python3 - "$OUT/gpu-run/summary.txt" "$OUT/run21-summary.tsv" "$SECONDS" "$rc" <<'PY'
import re, sys
src, dst, secs, rc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows, counts = [], {"PASS": 0, "FAIL": 0, "SKIP": 0}
for line in open(src, encoding="utf-8"):
    m = re.match(r"^(PASS|FAIL|SKIP)\s+(.*)$", line.rstrip("\n"))
    if not m:
        continue
    verdict, text = m.groups()
    words = text.split()
    step = " ".join(words[:2]) if words and words[0] == "bench" else (words[0] if words else "?")
    s = re.search(r"(?:\((\d+)s\)|\s(\d+)s\s)", text)
    rows.append((step, verdict, (s.group(1) or s.group(2)) if s else "0", text.replace("\t", " ")))
    counts[verdict] += 1
with open(dst, "w", encoding="utf-8") as f:
    for r in rows:
        f.write("\t".join(r) + "\n")
    word = "PASSED" if rc == 0 else "FAILED"
    f.write(f"run21\t{word}\t{secs}\t{counts['PASS']} pass, {counts['FAIL']} fail, {counts['SKIP']} skip\n")
PY
cat "$OUT/run21-summary.tsv"
exit "$rc"
