#!/usr/bin/env bash
# Bounded cargo-fuzz runs over flag translation and ACL error mapping (fuzz/).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 20). Prints PASS / SKIP / FAIL lines.
# Exit status: 0 every target ran clean, 1 a target FAILed (crash, or it could not be built),
# 77 SKIP (no nightly toolchain or no cargo-fuzz could be installed): scripts/reliability.sh
# prints SKIP for 77, never PASS. The targets are compiled on stable by CI in any case
# (`cargo check --bins` in fuzz/, see .ci/run), so a SKIP here never hides a broken target.
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
SKIP=77
secs="${1:-20}"
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal >/dev/null 2>&1 ||
        { echo "SKIP fuzz: no nightly toolchain (install failed)"; exit $SKIP; }
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked >/dev/null 2>&1 ||
        { echo "SKIP fuzz: cargo install cargo-fuzz failed"; exit $SKIP; }
fi
status=0
for t in flags errors; do
    log="fuzz/artifacts/$t.log"
    mkdir -p fuzz/artifacts
    if (cd fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="$secs") >"$log" 2>&1; then
        echo "PASS fuzz $t (${secs}s; $(grep -o 'Done [0-9]* runs' "$log" | tail -1))"
        rm -f "$log"
    else
        echo "FAIL fuzz $t (log: $log, inputs: fuzz/artifacts/$t/)"
        tail -30 "$log"
        status=1
    fi
done
exit $status
