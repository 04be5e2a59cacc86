#!/usr/bin/env bash
# gpu-run.sh: run the bundle made by scripts/gpu-bundle.sh on the GPU machine.
#
# Called by the device `run` tool from the repository root, with carry ["gpu-bundle"]:
#     bash gpu-bundle/gpu-run.sh              # every bundled test binary, the CLI, the examples
#     SANITIZE=1 bash gpu-bundle/gpu-run.sh   # sanitizer mode (below) instead of the plain runs
#     SANITIZE=xstream-cuda--nccl--test bash gpu-bundle/gpu-run.sh   # memcheck on one binary
#     ONLY=cuda bash gpu-bundle/gpu-run.sh    # only manifest names containing "cuda"
#     NO_CLI=1 NO_EXAMPLES=1 bash gpu-bundle/gpu-run.sh   # test binaries only
#     BENCH=1 bash gpu-bundle/gpu-run.sh      # also the benches: bench/gpu_ops, then torch_bench.py
#     BENCH=only bash gpu-bundle/gpu-run.sh   # only the benches (no tests, no CLI)
#     BENCH=ipc bash gpu-bundle/gpu-run.sh    # only bench/gpu_ipc (cross-process events and
#                                             # IPC buffer copies against the raw driver)
#     BENCH=any bash gpu-bundle/gpu-run.sh    # only bench/any_dispatch's paired part (the
#                                             # erased path against the generic one, host and CUDA)
#   Bench output goes to tests.log; tables to gpu_bench.md, gpu_bench.json, gpu_ipc.md,
#   any_dispatch.txt, torch_bench.md in $OUT. A bench step's verdict counts the targets its
#   table shows missed ("MISS" lines, "FAIL" rows): PASS only when it ran and missed none,
#   FAIL saying how many of how many when it missed any (the table holds the numbers), FAIL
#   too when it did not run or wrote no table.
#
# Every step prints one verdict line into summary.txt (written as the run goes, so a run cut
# short still leaves one), and the script ends with
#     gpu-run: P passed, F failed, S skipped: PASSED | FAILED
# PASS means the step ran and what it checks held; FAIL (the script then exits 1) that it ran
# and failed (a non-zero exit status, a failing test, a sanitizer error, a missing result);
# SKIP (with the reason) that it did not run. A test binary in which every test printed
# "SKIP:" is a SKIP, not a PASS.
#
# Sanitizer mode (SANITIZE=1, or SANITIZE=all): every bundled test binary under
# `compute-sanitizer --tool memcheck --leak-check full`, then the modules test binary (which
# launches the builtin module's LCG and delay kernels, and user PTX) and the reduce test binary
# (the builtin module's xstream_reduce_* kernels) under racecheck and synccheck. A
# sanitizer step is PASS only when compute-sanitizer exits 0, every "ERROR SUMMARY" line it
# printed (one per process: --target-processes all follows child processes) says "0 errors", and the test
# harness reports `test result: ok`. Options and their reasons:
#   --report-api-errors no: the tests provoke failing driver calls on purpose (bad input, capture
#     rules, a missing peer); those are checked by the tests themselves, not memory errors.
#   NCCL_CUMEM_ENABLE=0 (binaries whose name contains "nccl"): NCCL then allocates its own
#     buffers with ordinary cuMemAlloc instead of the cuMem virtual-memory API; the earlier
#     two-GPU sanitizer run (docs/gpu-runs/2026-11-24-2xh200-run14/sanitizer.md) used it, and a
#     run with NCCL's default (cuMem) allocations has not been recorded. NCCL_NVLS_ENABLE=0 as
#     everywhere in these scripts.
#   Tests left out under memcheck (SAN_SKIP_<binary> below), each with its reason:
#     fault_is_sticky_and_fails_pending_callbacks_once, fault_fails_callbacks_on_other_streams
#       (xstream-cuda--cuda--test): they launch Kernel::Fault, which stores to an illegal address
#       on purpose to check that xstream reports the sticky fault; memcheck reports that store,
#       as it should.
#     persistent_stream_records (xstream-cuda--cuda--test): left out of the binary's memcheck run
#       and run under memcheck ALONE (san_alone below: its own process, --exact). In the binary's
#       run its relaxed-mode capture came back CUDA_ERROR_STREAM_CAPTURE_INVALIDATED at the kernel
#       launch (GPU run 15, 2 x H100); alone it passes under memcheck with 0 errors, with lazy and
#       eager module loading, and a raw-driver program doing the same capture
#       (scripts/gpu/capture_memcheck.cu) passes under memcheck (run 16, docs/gpu-runs/). What
#       the earlier tests of the same process leave behind that memcheck turns into an
#       invalidation is not identified.
#     captures_survive_teardown_on_background_threads, host_access_waits_for_copies_made_before_a_capture
#       (data_path): left out of the binary's memcheck run and run under memcheck ALONE, as
#       persistent_stream_records. In the binary's run under memcheck the first of them to run
#       had its capture invalidated ("Capture was invalidated by a prior API call", no failing
#       call logged before it): host_access in GPU runs 29-31, captures_survive in run 33. Each
#       passes under memcheck alone (run 33), and every data_path test passes in the binary's
#       run without a sanitizer (runs 32, 33); a raw-driver program whose other thread releases
#       objects during a capture is not invalidated under memcheck (scripts/gpu/
#       capture_teardown.cu, runs 33-34). docs/gpu-runs/2026-11-28-2xh200-run34/ narrows which
#       earlier test it takes.
#     memory_is_flat_after_100k_host_buffer_and_async_allocation_cycles (data_path): 100,000
#       allocation cycles, each call intercepted by the sanitizer, run past the time limit; the
#       same cycle runs under memcheck in many_host_buffer_and_async_allocation_cycles_run_clean.
#     nccl_init_rank_missing_peer_times_out (nccl): ncclCommInitRank is left waiting for a peer
#       that never comes and is then abandoned; libnccl keeps a 4-byte cuMemHostAlloc block of
#       that init (backtrace: cuMemHostAlloc <- libnccl.so <- pncclCommInitRank), which
#       --leak-check full reports as NCCL's own leak (GPU run 15, 2 x H100, 2026-11-25). The test
#       runs in the plain run; every other NCCL test runs under memcheck with the leak check.
#   SAN_EXTRA_SKIP="name ..." adds skips (each is printed in the verdict line).
#   Binaries that load no CUDA driver are not run under a sanitizer (SKIP with the reason,
#   san_no_cuda below): the null-driver test (xstream-cuda--null_driver--test) and the null
#   driver's own tests (xstream-cuda-null--*) run against backends/cuda-null, a CPU test double
#   linked as libcuda.so; compute-sanitizer exits 255 on a process that never initialises CUDA
#   (GPU run of 2026-11-27, call B), which said nothing about memory. They run in the plain run.
#
# Time: the device tool stops a command after 600 s. The script keeps to BUDGET seconds
# (default 560): a step that cannot start with at least 20 s left is a SKIP saying so (rerun it
# with ONLY=<name>), and each step's timeout is cut to the time left.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1
export NCCL_NVLS_ENABLE=0
LOG="$OUT/tests.log"
SUM="$OUT/summary.txt"
: >"$LOG"; : >"$SUM"
BUDGET="${BUDGET:-560}"
SANITIZE="${SANITIZE:-}"
[ "$SANITIZE" != 0 ] || SANITIZE=""
npass=0; nfail=0; nskip=0

# verdict PASS|FAIL|SKIP TEXT: one line into the summary (and counted).
verdict() {
    case "$1" in
        PASS) npass=$((npass + 1)) ;;
        FAIL) nfail=$((nfail + 1)) ;;
        SKIP) nskip=$((nskip + 1)) ;;
    esac
    printf '%-4s %s\n' "$1" "$2" >>"$SUM"
}
left() { echo $((BUDGET - SECONDS)); }
# limit WANT: the timeout for a step (WANT, cut to the time left); empty when under 20 s left.
limit() { local l; l=$(left); [ "$l" -ge 20 ] || return 1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }

{
    echo "== machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode,persistence_mode --format=csv 2>&1 || echo "nvidia-smi unavailable"
    nvidia-smi 2>&1 | head -15
    ls -l /usr/local/nvidia/lib64/libcuda.so* 2>&1 | head -3
    command -v compute-sanitizer && compute-sanitizer --version 2>&1 | tail -2
} >"$OUT/machine.txt" 2>&1
head -4 "$OUT/machine.txt"

NGPU=""
if gl=$(nvidia-smi -L 2>&1); then
    NGPU=$(grep -c '^GPU' <<<"$gl")
    [ "$NGPU" -ge 1 ] || NGPU=""
fi
if [ -z "$NGPU" ]; then
    verdict FAIL "gpu count: nvidia-smi -L failed or listed no GPU ($(head -c 160 <<<"${gl:-}" | tr '\n' ' '))"
fi

MANIFEST="$HERE/manifest.tsv"
names=()
if [ -f "$MANIFEST" ]; then
    while IFS=$'\t' read -r name _pkg _tgt; do
        [ -n "$name" ] || continue
        [ -z "${ONLY:-}" ] || [[ "$name" == *"$ONLY"* ]] || continue
        names+=("$name")
    done <"$MANIFEST"
fi

# Reads a harness output file: sets res (the `test result:` line), ran, skips, fails.
read_harness() { # file
    res=$(grep -E "^test result:" "$1" | tail -1)
    ran=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed.*/\1/p' "$1" | tail -1)
    # "SKIP: <test>: <reason>" at a line's start or after "test <name> ... ".
    skips=$(grep -cE "(^|\.\.\. )SKIP:" "$1")
    # Tests that skipped as a whole: their first output, on the harness's "test NAME ... " line,
    # is "SKIP:" (a test that runs a suite prints the SKIP of a listed check on a line of its own).
    skipped_tests=$(grep -cE "^test .* \.\.\. SKIP:" "$1")
    fails=$(grep -E "^test .* FAILED$" "$1" | sed 's/^test //; s/ \.\.\. FAILED$//' | tr '\n' ' ')
}

run_one() { # name
    local name="$1" bin="$HERE/bin/$1" args=() t lim
    case "$name" in *cuda*|*nccl*) args+=(--test-threads=1) ;; esac
    if ! lim=$(limit 300); then verdict SKIP "$name: time budget spent (rerun with ONLY=$name)"; return; fi
    echo "===== $name" >>"$LOG"
    t=$SECONDS
    timeout "$lim" "$bin" "${args[@]}" --nocapture >"$LOG.tmp" 2>&1
    local rc=$?
    cat "$LOG.tmp" >>"$LOG"
    read_harness "$LOG.tmp"
    rm -f "$LOG.tmp"
    local info; info=$(printf '%-45s %4ss skips=%s %s %s' "$name" "$((SECONDS - t))" "$skips" "${res#test result: }" "${fails:+failed: $fails}")
    if [ "$rc" -ne 0 ]; then
        verdict FAIL "$info (rc=$rc$([ "$rc" -eq 124 ] && echo ", timed out after ${lim}s"))"
    elif [ -z "$res" ]; then
        verdict FAIL "$info (no test result line)"
    elif [ "${ran:-0}" -eq 0 ]; then
        verdict SKIP "$info (the binary holds no test)"
    elif [ "$skipped_tests" -ge "$ran" ]; then
        verdict SKIP "$info (every test printed SKIP)"
    else
        verdict PASS "$info"
    fi
}

# Tests left out under memcheck, per binary (reasons in the header).
san_skips() { # name
    case "$1" in
        xstream-cuda--cuda--test) echo "fault_is_sticky_and_fails_pending_callbacks_once fault_fails_callbacks_on_other_streams persistent_stream_records" ;;
        xstream-cuda--data_path--test) echo "memory_is_flat_after_100k_host_buffer_and_async_allocation_cycles" ;;
        xstream-cuda--nccl--test) echo "nccl_init_rank_missing_peer_times_out" ;;
    esac
}

# Why a binary is not run under a sanitizer at all (empty: it is): it loads no CUDA driver.
san_no_cuda() { # name
    case "$1" in
        *--null_driver--*|xstream-cuda-null--*)
            echo "loads no CUDA driver: it runs against the null driver (backends/cuda-null, a CPU test double linked as libcuda.so), which compute-sanitizer cannot follow (exit 255 without a CUDA program); it runs in the plain run" ;;
    esac
}

# Tests left out of a binary's memcheck run that then run under memcheck alone, each in its own
# process (reasons in the header).
san_alone() {
    case "$1" in
        xstream-cuda--cuda--test) echo "persistent_stream_records" ;;
        xstream-cuda--data_path--test) echo "captures_survive_teardown_on_background_threads host_access_waits_for_copies_made_before_a_capture" ;;
    esac
}

# sanitize TOOL NAME [TEST]: one test binary under compute-sanitizer (only TEST, with --exact,
# when given); log in $OUT/sanitizer.log.
sanitize() {
    local tool="$1" name="$2" bin="$HERE/bin/$2" alone="${3:-}" lim t rc skip=() s env=() opts=() why
    why=$(san_no_cuda "$name")
    if [ -n "$why" ]; then verdict SKIP "$tool $name: $why"; return; fi
    if ! lim=$(limit 400); then verdict SKIP "$tool $name: time budget spent (rerun with ONLY=$name)"; return; fi
    if [ "$("$bin" --list 2>/dev/null | grep -c ': test$')" -eq 0 ]; then
        verdict SKIP "$tool $name: the binary holds no test"; return
    fi
    [ "$tool" != memcheck ] || opts+=(--leak-check full)
    local skipped=""
    if [ -n "$alone" ]; then
        skip+=(--exact "$alone")
    elif [ "$tool" = memcheck ]; then
        for s in $(san_skips "$name") $(san_alone "$name") ${SAN_EXTRA_SKIP:-}; do skip+=(--skip "$s"); skipped+="$s "; done
    fi
    case "$name" in *nccl*) env+=(NCCL_CUMEM_ENABLE=0) ;; esac
    echo "===== compute-sanitizer --tool $tool $name${alone:+ --exact $alone} ${env[*]} ${skipped:+(skipped: $skipped)}" >>"$OUT/sanitizer.log"
    t=$SECONDS
    env "${env[@]}" timeout "$lim" compute-sanitizer --tool "$tool" "${opts[@]}" --report-api-errors no --target-processes all \
        --error-exitcode 99 "$bin" --test-threads=1 "${skip[@]}" >"$OUT/san.tmp" 2>&1
    rc=$?
    cat "$OUT/san.tmp" >>"$OUT/sanitizer.log"
    read_harness "$OUT/san.tmp"
    local es nes bad leak
    # memcheck and synccheck close with "ERROR SUMMARY: N errors"; racecheck with
    # "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)".
    es=$(grep -oE "ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\)" "$OUT/san.tmp")
    nes=$(grep -c . <<<"$es")
    bad=$(grep -vcE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)" <<<"$es")
    leak=$(grep -oE "LEAK SUMMARY: [0-9,]+ bytes leaked[^=]*" "$OUT/san.tmp" | tail -1)
    rm -f "$OUT/san.tmp"
    local info="$tool $name${alone:+ (only $alone)} $((SECONDS - t))s: ${es:+$(sort <<<"$es" | uniq -c | tr -s ' \n' ' ')}${leak:+; $leak}; ${res#test result: }${fails:+; failed: $fails}${skipped:+; not run: $skipped}${env[*]:+; ${env[*]}}"
    if [ "$rc" -ne 0 ]; then
        verdict FAIL "$info (rc=$rc$([ "$rc" -eq 124 ] && echo ", timed out after ${lim}s"))"
    elif [ -z "$es" ] || [ "$nes" -eq 0 ]; then
        verdict FAIL "$info (no ERROR SUMMARY line: the sanitizer did not report)"
    elif [ "$bad" -ne 0 ]; then
        verdict FAIL "$info"
    elif [ -z "$res" ] || [ "${res#test result: ok}" = "$res" ]; then
        verdict FAIL "$info (no passing test result line)"
    elif [ "${ran:-0}" -eq 0 ]; then
        verdict SKIP "$info (no test ran)"
    elif [ "$skipped_tests" -ge "$ran" ]; then
        verdict SKIP "$info (every test printed SKIP)"
    else
        verdict PASS "$info"
    fi
}

if [ -n "$SANITIZE" ]; then
    : >"$OUT/sanitizer.log"
    if ! command -v compute-sanitizer >/dev/null; then
        verdict FAIL "sanitizer mode: compute-sanitizer not found on PATH"
    elif [ "$SANITIZE" = 1 ] || [ "$SANITIZE" = all ]; then
        [ "${#names[@]}" -gt 0 ] || verdict FAIL "sanitizer mode: no test binary in $MANIFEST${ONLY:+ matching ONLY=$ONLY}"
        # The modules binary first, under all three tools (short runs), then the others.
        mod=""
        for n in "${names[@]}"; do [[ "$n" == *--modules--test ]] && mod="$n"; done
        if [ -n "$mod" ]; then
            sanitize memcheck "$mod"
            sanitize racecheck "$mod"
            sanitize synccheck "$mod"
        elif [ -z "${ONLY:-}" ]; then
            verdict FAIL "racecheck/synccheck: the modules test binary (xstream-cuda--modules--test) is not in the bundle"
        fi
        red=""
        for n in "${names[@]}"; do [[ "$n" == *--reduce--test ]] && red="$n"; done
        if [ -n "$red" ]; then
            # The builtin module's reduce kernels (xstream_reduce_*) run in this binary.
            sanitize racecheck "$red"
            sanitize synccheck "$red"
        fi
        for n in "${names[@]}"; do
            [ "$n" = "$mod" ] || sanitize memcheck "$n"
            for a in $(san_alone "$n"); do sanitize memcheck "$n" "$a"; done
        done
    elif [ -x "$HERE/bin/$SANITIZE" ]; then
        sanitize memcheck "$SANITIZE"
        for a in $(san_alone "$SANITIZE"); do sanitize memcheck "$SANITIZE" "$a"; done
        [[ "$SANITIZE" != *--modules--test ]] || { sanitize racecheck "$SANITIZE"; sanitize synccheck "$SANITIZE"; }
    else
        verdict FAIL "sanitizer mode: $HERE/bin/$SANITIZE is not a bundled binary"
    fi
elif [ "${BENCH:-}" != only ] && [ "${BENCH:-}" != ipc ] && [ "${BENCH:-}" != any ]; then
    [ "${#names[@]}" -gt 0 ] || verdict FAIL "tests: no test binary in $MANIFEST${ONLY:+ matching ONLY=$ONLY}"
    for n in "${names[@]}"; do run_one "$n"; done

    if [ -n "${NO_CLI:-}" ]; then
        :
    elif [ ! -x "$HERE/bin/xstream" ]; then
        verdict SKIP "CLI: bin/xstream is not in the bundle"
    else
        : >"$OUT/cli.log"
        for cmd in "info" "demo --backend cuda --trace $OUT/trace.json" "conform --backend cuda" \
                   "demo --backend host --streams 4"; do
            if ! lim=$(limit 120); then verdict SKIP "CLI xstream $cmd: time budget spent"; continue; fi
            echo "===== xstream $cmd" >>"$OUT/cli.log"
            # shellcheck disable=SC2086
            timeout "$lim" "$HERE/bin/xstream" $cmd >>"$OUT/cli.log" 2>&1
            rc=$?
            if [ "$rc" -eq 0 ]; then verdict PASS "CLI xstream $cmd"; else verdict FAIL "CLI xstream $cmd (rc=$rc)"; fi
        done
    fi

    if [ -n "${NO_EXAMPLES:-}" ]; then
        :
    elif [ ! -d "$HERE/bin/examples" ]; then
        verdict SKIP "examples: bin/examples is not in the bundle"
    else
        : >"$OUT/examples.log"
        for e in "$HERE"/bin/examples/*; do
            args="--backend cuda"
            [ "$(basename "$e")" = data-parallel-allreduce ] && args="--backend cuda --ranks ${NGPU:-1}"
            if ! lim=$(limit 120); then verdict SKIP "example $(basename "$e"): time budget spent"; continue; fi
            echo "===== $(basename "$e") $args" >>"$OUT/examples.log"
            # shellcheck disable=SC2086
            timeout "$lim" "$e" $args >>"$OUT/examples.log" 2>&1
            rc=$?
            if [ "$rc" -eq 0 ]; then verdict PASS "example $(basename "$e") $args"; else verdict FAIL "example $(basename "$e") $args (rc=$rc)"; fi
        done
    fi
fi

# bench/gpu_ipc (~10-40 s): PASS when it ran and met every target (its PASS lines), FAIL
# saying how many when any MISS line, or when it failed or wrote no table; SKIP when it found
# no CUDA driver.
ipc_bench() {
    local lim t0 rc np nm
    if [ ! -x "$HERE/bench/gpu_ipc" ]; then verdict SKIP "bench gpu_ipc: not in the bundle (bench/gpu_ipc)"; return; fi
    if ! lim=$(limit 240); then verdict SKIP "bench gpu_ipc: time budget spent"; return; fi
    echo "===== bench gpu_ipc" >>"$LOG"
    rm -f "$OUT/gpu_ipc.md"
    t0=$SECONDS
    OUT="$OUT" timeout "$lim" "$HERE/bench/gpu_ipc" >"$OUT/gpu_ipc.log" 2>&1
    rc=$?
    cat "$OUT/gpu_ipc.log" >>"$LOG"
    np=$(grep -c '^PASS: ' "$OUT/gpu_ipc.md" 2>/dev/null)
    nm=$(grep -c '^MISS: ' "$OUT/gpu_ipc.md" 2>/dev/null)
    if [ "$rc" -ne 0 ]; then
        verdict FAIL "bench gpu_ipc (rc=$rc$([ "$rc" -eq 124 ] && echo ", timed out after ${lim}s")): $(grep -m1 -E '^FAIL|FAILED' "$OUT/gpu_ipc.log" | head -c 200)"
    elif grep -q '^SKIP: no CUDA driver' "$OUT/gpu_ipc.log"; then
        verdict SKIP "bench gpu_ipc: $(grep -m1 '^SKIP: ' "$OUT/gpu_ipc.log" | head -c 200)"
    elif [ ! -s "$OUT/gpu_ipc.md" ]; then
        verdict FAIL "bench gpu_ipc: no gpu_ipc.md written"
    elif [ $((${np:-0} + ${nm:-0})) -eq 0 ]; then
        verdict FAIL "bench gpu_ipc: gpu_ipc.md holds no PASS or MISS line"
    elif [ "${nm:-0}" -gt 0 ]; then
        verdict FAIL "bench gpu_ipc ran ($((SECONDS - t0))s); targets: ${nm} of $((${np:-0} + nm)) missed (MISS lines in gpu_ipc.md)"
    else
        verdict PASS "bench gpu_ipc ran ($((SECONDS - t0))s); targets: all ${np:-0} met (gpu_ipc.md)"
    fi
}

# bench/any_dispatch, paired part only (~20 s: host and CUDA, 1.5 s per operation): PASS when
# every paired row met its 2 ns target; FAIL saying how many rows are MISS or UNRESOLVED, or
# when it printed no paired row or failed.
any_bench() {
    local lim t0 rc nrow nbad ncuda
    if [ ! -x "$HERE/bench/any_dispatch" ]; then verdict SKIP "bench any_dispatch: not in the bundle (bench/any_dispatch)"; return; fi
    if ! lim=$(limit 120); then verdict SKIP "bench any_dispatch: time budget spent"; return; fi
    echo "===== bench any_dispatch NONE" >>"$LOG"
    t0=$SECONDS
    timeout "$lim" "$HERE/bench/any_dispatch" NONE >"$OUT/any_dispatch.txt" 2>&1
    rc=$?
    cat "$OUT/any_dispatch.txt" >>"$LOG"
    nrow=$(grep -c '^paired .*target <= 2 ns: \(PASS\|MISS\|UNRESOLVED\)' "$OUT/any_dispatch.txt")
    nbad=$(grep -c '^paired .*target <= 2 ns: \(MISS\|UNRESOLVED\)' "$OUT/any_dispatch.txt")
    ncuda=$(grep -c '^paired cuda ' "$OUT/any_dispatch.txt")
    if [ "$rc" -ne 0 ]; then verdict FAIL "bench any_dispatch (rc=$rc)"
    elif [ "${nrow:-0}" -eq 0 ]; then verdict FAIL "bench any_dispatch: no paired row"
    elif [ "${nbad:-0}" -gt 0 ]; then verdict FAIL "bench any_dispatch ran ($((SECONDS - t0))s); ${nbad} of ${nrow} rows MISS or UNRESOLVED against 2 ns; ${ncuda:-0} CUDA rows (any_dispatch.txt)"
    else verdict PASS "bench any_dispatch ran ($((SECONDS - t0))s); ${nbad:-0} of ${nrow} rows MISS or UNRESOLVED against 2 ns; ${ncuda:-0} CUDA rows (any_dispatch.txt)"; fi
}

if [ -z "$SANITIZE" ] && [ "${BENCH:-}" = ipc ]; then
    ipc_bench
elif [ -z "$SANITIZE" ] && [ "${BENCH:-}" = any ]; then
    any_bench
elif [ -z "$SANITIZE" ] && [ -n "${BENCH:-}" ] && [ "${BENCH}" != 0 ]; then
    # gpu_ops: ~10-30 s; gpu_ipc: ~10-40 s; torch_bench.py: ~10-30 s (plus torch import).
    # Logs into tests.log.
    if [ ! -x "$HERE/bench/gpu_ops" ]; then
        verdict SKIP "bench gpu_ops: not in the bundle (bench/gpu_ops)"
    elif ! lim=$(limit 300); then
        verdict SKIP "bench gpu_ops: time budget spent"
    else
        echo "===== bench gpu_ops" >>"$LOG"
        t0=$SECONDS
        OUT="$OUT" timeout "$lim" "$HERE/bench/gpu_ops" >>"$LOG" 2>&1
        rc=$?
        # Target verdicts: "| FAIL" (overhead table), "≥ 90%: FAIL" (copy and demo tables),
        # "(target ≥ 1.8×: FAIL)" (stream scaling lines).
        nf=$(grep -cE '(\| FAIL|: FAIL)' "$OUT/gpu_bench.md" 2>/dev/null)
        nt=$(grep -cE '(\| (PASS|FAIL)|: (PASS|FAIL))' "$OUT/gpu_bench.md" 2>/dev/null)
        if [ "$rc" -ne 0 ]; then verdict FAIL "bench gpu_ops (rc=$rc)"
        elif [ ! -s "$OUT/gpu_bench.md" ]; then verdict FAIL "bench gpu_ops: no gpu_bench.md written"
        elif [ "${nt:-0}" -eq 0 ]; then verdict FAIL "bench gpu_ops: gpu_bench.md holds no target verdict"
        elif [ "${nf:-0}" -gt 0 ]; then verdict FAIL "bench gpu_ops ran ($((SECONDS - t0))s); performance targets: ${nf} of ${nt} rows missed (FAIL rows in gpu_bench.md)"
        else verdict PASS "bench gpu_ops ran ($((SECONDS - t0))s); performance targets: all ${nt} rows met (gpu_bench.md)"; fi
    fi
    ipc_bench
    any_bench
    if [ ! -f "$HERE/torch_bench.py" ]; then
        verdict SKIP "bench torch_bench.py: not in the bundle"
    elif ! lim=$(limit 300); then
        verdict SKIP "bench torch_bench.py: time budget spent"
    else
        echo "===== bench torch_bench.py" >>"$LOG"
        t0=$SECONDS
        OUT="$OUT" timeout "$lim" python3 "$HERE/torch_bench.py" >>"$LOG" 2>&1
        rc=$?
        if [ "$rc" -eq 0 ]; then verdict PASS "bench torch_bench.py ($((SECONDS - t0))s)"; else verdict FAIL "bench torch_bench.py (rc=$rc)"; fi
    fi
fi

echo
echo "== failing tests (tail of logs)"
grep -hE "panicked at|^test .* FAILED|^---- |ERROR SUMMARY: [1-9]" "$LOG" "$OUT/sanitizer.log" 2>/dev/null | tail -40
echo
echo "== SUMMARY (full logs: tests.log, summary.txt, machine.txt${SANITIZE:+, sanitizer.log} in \$OUT)"
total=$((npass + nfail + nskip))
if [ "$total" -eq 0 ]; then verdict FAIL "nothing ran (empty manifest or filters)"; total=1; fi
word=PASSED; [ "$nfail" -eq 0 ] || word=FAILED
echo "gpu-run${SANITIZE:+ (sanitizer)}: $npass passed, $nfail failed, $nskip skipped: $word" >>"$SUM"
cat "$SUM"
if [ -z "$SANITIZE" ] && [ -n "${BENCH:-}" ] && [ "${BENCH}" != 0 ]; then
    files="gpu_bench.md:gpu_ops gpu_ipc.md:gpu_ipc torch_bench.md:torch_bench"
    [ "${BENCH}" != ipc ] || files="gpu_ipc.md:gpu_ipc"
    [ "${BENCH}" != any ] || files=""
    if [ -f "$OUT/any_dispatch.txt" ]; then echo; grep '^paired\|^SKIP' "$OUT/any_dispatch.txt"; fi
    for f in $files; do
        echo
        if [ -f "$OUT/${f%%:*}" ]; then cat "$OUT/${f%%:*}"; else
            echo "(${f%%:*} missing; from tests.log:)"
            sed -n "/^===== bench ${f#*:}/,/^===== /p" "$LOG" | grep -v "^===== " | tail -8
        fi
    done
    echo
    tail -1 "$SUM"
fi
[ "$nfail" -eq 0 ]
