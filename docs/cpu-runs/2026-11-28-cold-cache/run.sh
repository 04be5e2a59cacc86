#!/usr/bin/env bash
# Seven runs of the null-driver test binary before and after, alternating, in the null
# driver's eviction mode (README.md).
# Usage: run.sh BEFORE_BIN AFTER_BIN OUT_DIR
set -euo pipefail
before=$1 after=$2 out=$3
export XNULL_EVICT_KB=${XNULL_EVICT_KB:-3072} XSTREAM_NULL_TIMING_CALLS=${XSTREAM_NULL_TIMING_CALLS:-1000}
for i in 1 2 3 4 5 6 7; do
    for side in before after; do
        bin=$before
        [ "$side" = after ] && bin=$after
        echo "## run $i of 7 ($(date -u +%T) UTC, /proc/loadavg $(cat /proc/loadavg), XNULL_EVICT_KB=$XNULL_EVICT_KB)" >>"$out/$side.log"
        "$bin" --nocapture >>"$out/$side.log" 2>&1
    done
done
