#!/usr/bin/env bash
# Counts instructions per launch of every launch_count variant under callgrind over the null
# driver. Usage: count.sh <launch_count binary> <dir with libcuda.so(.1)> <log file>
set -euo pipefail
bin=$1 lib=$2 log=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/launch-count-XXXXXX)
: >"$log"
for v in raw-empty empty raw-args3 args3-scalars args3 builder-args3 raw-delay delay; do
  out="$tmp/cg.$v"
  LD_LIBRARY_PATH=$lib valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect='*launch_count::measured*' "$bin" "$v" >"$tmp/stdout" 2>"$tmp/stderr"
  n=$(sed -n 's/.*: \([0-9]*\) launches counted/\1/p' "$tmp/stdout")
  {
    echo "=== variant $v ($n launches counted)"
    echo "--- self Ir by object: total, per launch"
    python3 "$here/by_object.py" "$out" "$n"
    echo "--- self Ir by function (callgrind_annotate, this executable and libc)"
    callgrind_annotate --inclusive=no --threshold=99 "$out" 2>/dev/null \
      | grep -v 'libxstream_cuda_null' | sed -n '/^Ir/,$p' | sed -n '3,40p'
    echo
  } >>"$log"
done
rm -rf "$tmp"
