#!/usr/bin/env bash
# The slow reliability checks (docs/reliability.md): the ignored stress runs, Miri on
# xstream-core and a host subset, bounded fuzzing, valgrind. Prints PASS / SKIP / FAIL lines;
# exits non-zero when something FAILed (a SKIP is not a failure).
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
fails=0
step() { # name, command...
    local name="$1"; shift
    local t0=$SECONDS
    if "$@"; then echo "PASS $name ($((SECONDS - t0))s)"; else echo "FAIL $name ($((SECONDS - t0))s)"; fails=$((fails + 1)); fi
}

echo "== ignored (slow) tests: 8 x 100k stress, host and simulator"
step "slow tests" cargo test -p xstream-conformance --test stress --test fault_sweep --test bad_input -- --ignored

echo "== loom models (callback slot fire-once, panic slot, completion wake-ups)"
step "loom" env RUSTFLAGS="--cfg loom" cargo test -p xstream-core --test loom --release --target-dir target/loom

echo "== Miri"
if rustup toolchain install nightly --profile minimal --component miri,rust-src >/dev/null 2>&1 \
    || cargo +nightly miri --version >/dev/null 2>&1; then
    export MIRIFLAGS="-Zmiri-ignore-leaks -Zmiri-disable-isolation"
    step "miri xstream-core" cargo +nightly miri test -p xstream-core --lib
    # The host backend's unit and integration tests (tests that assert wall-clock bounds or
    # read /proc are ignored under Miri, with the reason in their attribute).
    step "miri xstream-host" cargo +nightly miri test -p xstream-host
else
    echo "SKIP miri: 'rustup +nightly component add miri rust-src' failed (offline or no nightly)"
fi

echo "== fuzz (bounded)"
step "fuzz" scripts/fuzz.sh "${FUZZ_SECONDS:-20}"

echo "== valgrind"
step "valgrind" scripts/valgrind.sh

if [ "$fails" -ne 0 ]; then echo "reliability: $fails step(s) FAILED"; exit 1; fi
echo "reliability: all steps passed or skipped"
