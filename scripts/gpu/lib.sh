# lib.sh: the helpers the GPU run scripts share (run19, run22, run23, run24). Sourced, not run:
#     set -uo pipefail
#     . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#     gpu_run_init run24 540
#
# gpu_run_init NAME BUDGET   $OUT (default ./out, made), $W (a fresh /tmp/NAME.XXXX for the
#                            logs), $TSV ($OUT/NAME-summary.tsv, emptied), $BUDGET (from the
#                            environment, else the given default), $G (gpu-bundle), the driver's
#                            library path, RUST_BACKTRACE=1, NCCL_NVLS_ENABLE=0, the counters,
#                            and a TERM/INT trap that finishes the summary and exits 1.
# step NAME VERDICT SECONDS DETAIL
#                            one row of $TSV (and stdout): name, PASS|FAIL|SKIP, seconds, the
#                            detail (tabs and newlines made spaces, at most 400 bytes); counted.
# left                       seconds of $BUDGET left.
# cap WANT                   WANT seconds, cut to the time left less 10 (at least 1).
# finish                     the last row, "NAME<TAB>PASSED|FAILED<TAB>seconds<TAB>P pass, F
#                            fail, S skip", and $OUT/NAME-logs.tar.gz of $W.
# machine_info               $W/machine.txt (date, GPUs, driver, compute-sanitizer), printed.
# need_bundle                a FAIL row and exit 1 when $G/manifest.tsv is missing.
# bundle_tests               every bundled test binary once (gpu-run.sh NO_CLI=1
#                            NO_EXAMPLES=1, 170 s), one row per verdict; sets conf_runs and
#                            conf_pass (1 each when the conformance suite ran / passed there).
# memcheck BINARY CAP [all]  BINARY under compute-sanitizer memcheck (gpu-run.sh SANITIZE=BINARY
#                            within CAP seconds): the row "memcheck BINARY" of gpu-run.sh's first
#                            verdict; with "all", one row more for each further verdict (a test
#                            run alone: "memcheck BINARY (only TEST)"; racecheck and synccheck of
#                            the modules binary: "racecheck BINARY"...); SKIP when CAP is under 40.
# conf_repeats WANT          whole conformance runs on CUDA until WANT in all (counting
#                            bundle_tests' run) or under 35 s are left, one row each, then the
#                            row conformance-repeats: PASS only when WANT of WANT passed.
# gpu_ops_step WANT          bench/gpu_ops within cap WANT: PASS when every target row of
#                            gpu_bench.md met its target (copied to $OUT).

gpu_run_init() { # name budget
    RUN="$1"
    OUT="${OUT:-$PWD/out}"
    mkdir -p "$OUT"
    W=$(mktemp -d "/tmp/$RUN.XXXX")
    TSV="$OUT/$RUN-summary.tsv"
    : >"$TSV"
    BUDGET="${BUDGET:-$2}"
    G=gpu-bundle
    export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export RUST_BACKTRACE=1 NCCL_NVLS_ENABLE=0
    np=0; nf=0; ns=0
    trap 'finish; exit 1' TERM INT
}

step() { # name verdict seconds detail
    case "$2" in PASS) np=$((np + 1)) ;; FAIL) nf=$((nf + 1)) ;; *) ns=$((ns + 1)) ;; esac
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(tr '\t\n' '  ' <<<"$4" | head -c 400)" | tee -a "$TSV"
}
left() { echo $((BUDGET - SECONDS)); }
cap() { local l=$(( $(left) - 10 )); [ "$l" -ge 1 ] || l=1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
pack() {
    tar czf "$OUT/$RUN-logs.tar.gz" -C "$W" . 2>/dev/null
}
finish() {
    local word=PASSED
    [ "$nf" -eq 0 ] || word=FAILED
    printf '%s\t%s\t%s\t%s pass, %s fail, %s skip\n' "$RUN" "$word" "$SECONDS" "$np" "$nf" "$ns" | tee -a "$TSV"
    pack
}

machine_info() {
    { date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
      command -v compute-sanitizer && compute-sanitizer --version | tail -1; } >"$W/machine.txt" 2>&1
    cat "$W/machine.txt"
}

need_bundle() {
    if [ ! -f "$G/manifest.tsv" ]; then
        step bundle FAIL 0 "$G/manifest.tsv missing: unpack gpu-bundle.tar.xz first"
        finish; exit 1
    fi
}

bundle_tests() {
    local t rc line v rest
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
}

memcheck() { # binary cap [all]
    local b="$1" c="$2" t line v rest name k=0
    if [ "$c" -lt 40 ]; then step "memcheck $b" SKIP 0 "time budget spent (the repeats come first)"; return; fi
    t=$SECONDS
    OUT="$W/san-$b" SANITIZE="$b" BUDGET="$c" timeout $((c + 10)) bash $G/gpu-run.sh >"$W/san-$b.txt" 2>&1
    while IFS= read -r line; do
        v=${line%% *}; rest=${line#* }; k=$((k + 1))
        name="memcheck $b"
        if [ "$k" -gt 1 ]; then
            name="${rest%% *} $b"
            [[ "$rest" =~ \(only\ ([^\)]*)\) ]] && name+=" (only ${BASH_REMATCH[1]})"
        fi
        step "$name" "$v" "$((SECONDS - t))" "$rest"
        [ "${3:-}" = all ] || break
    done < <(grep -E '^(PASS|FAIL|SKIP) ' "$W/san-$b/summary.txt" 2>/dev/null)
    [ "$k" -gt 0 ] || step "memcheck $b" FAIL "$((SECONDS - t))" "no verdict (san-$b.txt)"
}

conf_repeats() { # want
    local want="$1" bin=$G/bin/xstream-conformance--cuda--test t rc ep
    while [ -x "$bin" ] && [ "$conf_runs" -lt "$want" ] && [ "$(left)" -gt 35 ]; do
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
    if [ "$conf_runs" -eq "$want" ] && [ "$conf_pass" -eq "$want" ]; then
        step conformance-repeats PASS 0 "$want of $want whole runs passed"
    else
        step conformance-repeats FAIL 0 "$conf_pass of $conf_runs whole runs passed (target $want of $want)"
    fi
}

gpu_ops_step() { # want
    local t rc f n
    if [ ! -x "$G/bench/gpu_ops" ]; then
        step gpu_ops FAIL 0 "bench/gpu_ops not in the bundle"
    elif [ "$(left)" -lt 60 ]; then
        step gpu_ops SKIP 0 "time budget spent"
    else
        t=$SECONDS
        OUT="$W" timeout "$(cap "$1")" "$G/bench/gpu_ops" >"$W/gpu_ops.log" 2>&1
        rc=$?
        cp "$W/gpu_bench.md" "$OUT/" 2>/dev/null
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
}
