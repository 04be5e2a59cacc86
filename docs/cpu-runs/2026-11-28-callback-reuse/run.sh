#!/usr/bin/env bash
# Before and after, alternating (README.md): seven runs of the null-driver test binary, then
# seven runs of launch_profile's host-callback variants against the null driver.
# Usage: run.sh BEFORE_DIR AFTER_DIR OUT_DIR
# (each side's DIR holds deps/null_driver, deps/libxstream_cuda_null.so, launch_profile, and
# lib/ with libcuda.so and libcuda.so.1 linking to the double)
set -euo pipefail
before=$1 after=$2 out=$3
for i in 1 2 3 4 5 6 7; do
    for side in before after; do
        dir=$before
        [ "$side" = after ] && dir=$after
        echo "## run $i of 7 ($(date -u +%T) UTC, /proc/loadavg $(cat /proc/loadavg))" >>"$out/$side.log"
        "$dir/deps/null_driver" --nocapture >>"$out/$side.log" 2>&1
    done
done
for i in 1 2 3 4 5 6 7; do
    for side in before after; do
        dir=$before
        [ "$side" = after ] && dir=$after
        tmp=$(mktemp -d)
        echo "## run $i of 7 ($(date -u +%T) UTC, /proc/loadavg $(cat /proc/loadavg))" >>"$out/profile-$side.log"
        OUT=$tmp LP_ONLY="host callback" LD_LIBRARY_PATH="$dir/lib" "$dir/launch_profile" >>"$out/profile-$side.log" 2>&1
        rm -rf "$tmp"
    done
done
