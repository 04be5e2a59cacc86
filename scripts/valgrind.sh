#!/usr/bin/env bash
# The host and simulator test binaries once under valgrind memcheck (no "definitely lost").
# Prints PASS / SKIP / FAIL lines and the leak summary of each binary.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null 2>&1; then
    echo "SKIP valgrind: not installed"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || { echo "SKIP valgrind: python3 needed to read cargo's JSON"; exit 0; }
cargo build -p xstream-ascend-sim >/dev/null 2>&1
bins=$(cargo test --no-run --message-format=json -p xstream-host -p xstream-conformance -p xstream-ascend 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"]
        if name in ("cuda",): continue   # no GPU here; nothing to check
        print(m["executable"])
')
status=0
for b in $bins; do
    log="$(mktemp)"
    # Threads the runtimes leave behind (dispatcher, poller, reaper) are still reachable at
    # exit: only "definitely lost" and memory errors fail.
    if XSIM_DEVICES=2 valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite --error-exitcode=1 --log-file="$log" \
        "$b" --test-threads=2 >/dev/null 2>&1; then
        echo "PASS valgrind $(basename "$b")"
    else
        echo "FAIL valgrind $(basename "$b")"; cat "$log"; status=1
    fi
    rm -f "$log"
done
exit $status
