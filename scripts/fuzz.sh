#!/usr/bin/env bash
# Bounded cargo-fuzz runs over flag translation and ACL error mapping (fuzz/).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 20). Prints PASS / SKIP / FAIL lines.
set -uo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
if ! rustup toolchain list 2>/dev/null | grep -q nightly; then
    rustup toolchain install nightly --profile minimal >/dev/null 2>&1 || { echo "SKIP fuzz: no nightly toolchain (install failed)"; exit 0; }
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked >/dev/null 2>&1 || { echo "SKIP fuzz: cargo install cargo-fuzz failed"; exit 0; }
fi
status=0
for t in flags errors; do
    if (cd fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="$secs" 2>&1 | tail -3); then
        echo "PASS fuzz $t (${secs}s)"
    else
        echo "FAIL fuzz $t (see fuzz/artifacts/$t)"
        status=1
    fi
done
exit $status
