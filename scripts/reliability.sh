#!/usr/bin/env bash
# The slow reliability checks (docs/reliability.md): the #[ignore]d stress runs, loom, Miri on
# xstream-core and the host backend, bounded fuzzing, valgrind. Prints one PASS / SKIP / FAIL
# line per step and ends with `reliability: P passed, F failed, S skipped`.
# A step passes on exit status 0, is skipped on 77 (the tool cannot run on this machine, with
# the reason printed), and fails on anything else. Exits 1 when a step FAILed.
# Usage: scripts/reliability.sh [GROUP...]   groups: slow loom miri fuzz valgrind (default: all).
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
SKIP=77
passed=0; failed=0; skipped=0
groups="${*:-slow loom miri fuzz valgrind}"
for g in $groups; do
    case "$g" in slow | loom | miri | fuzz | valgrind) ;; *) echo "unknown group: $g" >&2; exit 2 ;; esac
done
want() { [[ " $groups " == *" $1 "* ]]; }
step() { # name, command...
    local name="$1"; shift
    local t0=$SECONDS rc
    "$@"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "PASS $name ($((SECONDS - t0))s)"; passed=$((passed + 1))
    elif [ "$rc" -eq "$SKIP" ]; then
        echo "SKIP $name ($((SECONDS - t0))s)"; skipped=$((skipped + 1))
    else
        echo "FAIL $name ($((SECONDS - t0))s, exit status $rc)"; failed=$((failed + 1))
    fi
}

# Runs the named #[ignore]d tests of one xstream-conformance test target. The step passes only
# when every named test ran and passed, and printed no SKIP (a test that did not run, or skipped,
# would otherwise let the step pass having checked less than it says).
ignored_tests() { # test target, test names...
    local target="$1" out rc t missing=""
    shift
    out=$(cargo test -p xstream-conformance --test "$target" -- --ignored --exact "$@" 2>&1)
    rc=$?
    grep -E '^test |^test result|panicked|^error|SKIP' <<<"$out"
    [ "$rc" -eq 0 ] || return 1
    for t in "$@"; do
        grep -qE "^test $t \.\.\. ok$" <<<"$out" || missing+=" $t"
    done
    if [ -n "$missing" ]; then
        echo "these #[ignore]d tests did not run and pass in $target:$missing"
        return 1
    fi
    if grep -q 'SKIP' <<<"$out"; then
        echo "a #[ignore]d test in $target printed SKIP"
        return 1
    fi
}

# The only #[ignore]d tests of the workspace are the two 8 x 100k stress runs (both must run); the fault sweep
# and bad-input tests are not ignored and run in every `cargo test --workspace`.
if want slow; then
    echo "== #[ignore]d (slow) tests: 8 x 100k stress on host and simulator"
    step "slow tests (stress, 8 x 100k)" ignored_tests stress host_8_threads_x_100k simulator_8_threads_x_100k
fi

if want loom; then
    echo "== loom models (callback slot fire-once, panic slot, completion wake-ups)"
    step "loom" env RUSTFLAGS="--cfg loom" cargo test -p xstream-core --test loom --release --target-dir target/loom
fi

miri_available() {
    rustup toolchain install nightly --profile minimal --component miri,rust-src >/dev/null 2>&1 ||
        cargo +nightly miri --version >/dev/null 2>&1
}
miri() { # cargo miri test arguments...
    if ! miri_available; then
        echo "SKIP miri: installing nightly with miri and rust-src failed (offline or no nightly)"
        return $SKIP
    fi
    MIRIFLAGS="-Zmiri-ignore-leaks -Zmiri-disable-isolation" cargo +nightly miri test "$@"
}
if want miri; then
    echo "== Miri"
    step "miri xstream-core" miri -p xstream-core --lib
    # The host backend's unit and integration tests (a test Miri cannot run is ignored under
    # Miri with the reason in its `#[cfg_attr(miri, ignore = "...")]`).
    step "miri xstream-host" miri -p xstream-host
fi

if want fuzz; then
    echo "== fuzz (bounded)"
    step "fuzz" scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi

if want valgrind; then
    echo "== valgrind"
    step "valgrind" scripts/valgrind.sh
fi

echo "reliability: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
