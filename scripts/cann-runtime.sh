#!/usr/bin/env bash
# The real CANN runtime (hicann/runtime, built from source) over xstream's driver emulation
# (backends/ascend-hal-sim, a libascend_hal.so test double), on a CPU machine. Issue 24.
#
# Steps: build the runtime's libraries from three bare git mirrors (no network needed), build the
# emulation, put it in place of the runtime's generated driver stub, run the feasibility program
# (aclInit, aclrtSetDevice, aclrtCreateStream, aclrtMemcpyAsync H2D/D2D/D2H,
# aclrtSynchronizeStream, data compared).
#
# Inputs (bare git mirrors; the `fetch` tool brings them in as /work/.mirror/<owner>+<name>/repo):
#   RT_GIT     hicann/runtime
#   CMAKE_GIT  hicann/cmake
#   CSEC_GIT   openeuler-mirror/libboundscheck
# Optional: WORK (default /tmp/xstream-cann), JOBS (default 2), RT_REF (default HEAD),
#   PREBUILT=<dir> to reuse the runtime libraries of an earlier run (its `run/lib64`, with the
#   platform files in `run/data` beside it) instead of building them: steps 1-3 are skipped, the
#   mirrors are then only read for the commits printed,
#   CANN_CONFORM=1 to also run, against the built runtime, `xstream conform --backend ascend`
#   (CONFORM_REPEATS runs, default 3, over HAL_SIM_DEVICES emulated devices, default 2, each
#   within CONFORM_TIMEOUT seconds, default 300; each must
#   fail exactly the checks in KNOWN_FAILS, default "flag_policy"), the bad-input cases (tests/tests/bad_input.rs,
#   `ascend_real_runtime_refuses_bad_input`), physical memory shared between two processes
#   (backends/ascend/tests/vmm_share.rs), IPC events between two processes
#   (backends/ascend/tests/ipc_events.rs) and the examples that need no kernel binary.
# Needs the Debian packages cmake, nlohmann-json3-dev, libprotobuf-dev, protobuf-compiler, gcc.
#
# Without the mirrors (CI cannot fetch them) every step prints SKIP with the reason and the script
# exits 0. A step prints PASS only when it checked something and it held; otherwise FAIL and the
# script exits non-zero.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# Where cargo puts what it builds (CARGO_TARGET_DIR when set).
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${WORK:-/tmp/xstream-cann}
JOBS=${JOBS:-2}
RT_REF=${RT_REF:-HEAD}
FAILS=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
skip() { echo "SKIP: $*"; }
# runtime_test LOGNAME TESTFILE TEST WHAT: one test of xstream-ascend's TESTFILE on the real
# runtime ($RUN/lib64), log $WORK/LOGNAME.log. PASS only when it ran (1 passed) and printed no
# SKIP; a failure, or a run that passed nothing or skipped, is a FAIL.
runtime_test() {
  local log=$WORK/$1.log
  if ! (cd "$ROOT" && XSTREAM_CANN_RUNTIME_DIR="$RUN/lib64" timeout "${CONFORM_TIMEOUT:-300}" nice cargo test \
    -p xstream-ascend --test "$2" "$3" -- --exact --nocapture) >"$log" 2>&1; then
    fail "$4 (log: $log)"
  elif grep -q 'test result: ok. 1 passed' "$log" && ! grep -q '^SKIP' "$log"; then
    pass "$4: $3 (log: $log)"
  else
    fail "$4 did not run (log: $log)"
  fi
}

PREBUILT=${PREBUILT:-}
# The checks that fail on the real runtime over the emulation, each explained in
# docs/cann-runtime.md (DEVICE_USE_ONLY needs a task scheduler firmware the emulation does not claim).
KNOWN_FAILS=${KNOWN_FAILS:-flag_policy}
if [ -n "$PREBUILT" ] && { [ ! -f "$PREBUILT/libacl_rt.so" ] || [ ! -d "$PREBUILT/../data/platform_config" ]; }; then
  fail "PREBUILT=$PREBUILT holds no libacl_rt.so (or no ../data/platform_config beside it)"; exit 1
fi
if [ -z "${RT_GIT:-}" ] || [ -z "${CMAKE_GIT:-}" ] || [ -z "${CSEC_GIT:-}" ]; then
  skip "runtime build: RT_GIT, CMAKE_GIT and CSEC_GIT (bare mirrors of hicann/runtime, hicann/cmake, openeuler-mirror/libboundscheck) are not all set"
  skip "feasibility run: no runtime built"
  skip "conformance on the real runtime: no runtime built"
  skip "bad-input cases on the real runtime: no runtime built"
  skip "examples on the real runtime: no runtime built"
  exit 0
fi
TOOLS="cmake gcc protoc git cargo"
[ -n "$PREBUILT" ] && TOOLS="gcc git cargo"
for t in $TOOLS; do
  command -v "$t" >/dev/null || { fail "tool $t missing (apt-get install cmake nlohmann-json3-dev libprotobuf-dev protobuf-compiler)"; exit 1; }
done

SRC=$WORK/src BUILD=$WORK/build THIRD=$WORK/3rd RUN=$WORK/run
mkdir -p "$WORK"
echo "runtime commit: $(git --git-dir="$RT_GIT" rev-parse "$RT_REF")"
echo "cmake commit:   $(git --git-dir="$CMAKE_GIT" rev-parse master)"
echo "csec commit:    $(git --git-dir="$CSEC_GIT" rev-parse HEAD)"

if [ -n "$PREBUILT" ]; then
  echo "runtime libraries: reused from $PREBUILT (built from the commits above; not rebuilt)"
else
# 1. Runtime sources; its CMake files rename protobuf's namespace for a private build: map it back
#    so Debian's libprotobuf serves.
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  mkdir -p "$SRC" && git --git-dir="$RT_GIT" archive "$RT_REF" | tar x -C "$SRC"
fi
grep -rl "google=ascend_private" "$SRC/src" "$SRC/cmake" --include=CMakeLists.txt --include='*.cmake' 2>/dev/null |
  xargs -r sed -i 's/google=ascend_private/ascend_private=google/g'

# 2. Third-party cache in the layout the runtime's cmake helpers expect (nothing is downloaded).
if [ ! -d "$THIRD/cann-cmake" ]; then
  mkdir -p "$THIRD/cann-cmake" && git --git-dir="$CMAKE_GIT" archive master | tar x -C "$THIRD/cann-cmake"
fi
LC=$THIRD/lib_cache
if [ ! -f "$LC/csec/lib/libc_sec.so" ]; then
  T=$(mktemp -d "$WORK/csec.XXXX")
  git --git-dir="$CSEC_GIT" archive HEAD | tar x -C "$T"
  mkdir -p "$T/obj" "$LC/csec/lib"
  for f in "$T"/src/*.c; do
    gcc -c -O2 -fPIC -fstack-protector-strong -I"$T/include" -I"$T/src" "$f" -o "$T/obj/$(basename "$f" .c).o" || exit 1
  done
  gcc -shared -fPIC -Wl,-soname,libc_sec.so -o "$LC/csec/lib/libc_sec.so" "$T"/obj/*.o
  ar rcs "$LC/csec/lib/libc_sec.a" "$T"/obj/*.o
  cp -r "$T/include" "$LC/csec/" && rm -rf "$T"
fi
mkdir -p "$LC/json/include" && cp -r /usr/include/nlohmann "$LC/json/include/"
for d in protobuf_static protobuf_shared protobuf_host_static; do
  mkdir -p "$LC/$d/include" "$LC/$d/lib" && ln -sfn /usr/include/google "$LC/$d/include/google"
done
ln -sf /usr/lib/x86_64-linux-gnu/libprotobuf.so "$LC/protobuf_shared/lib/libascend_protobuf.so"
ln -sf /usr/lib/x86_64-linux-gnu/libprotobuf.a "$LC/protobuf_static/lib/libascend_protobuf.a"
ln -sf /usr/lib/x86_64-linux-gnu/libprotobuf.a "$LC/protobuf_host_static/lib/libhost_ascend_protobuf.a"
mkdir -p "$LC/protoc" "$LC/abseil-cpp/absl/log" "$THIRD/makeself"
ln -sf /usr/bin/protoc "$LC/protoc/protoc" && touch "$LC/abseil-cpp/absl/log/absl_log.h"
for f in makeself.sh makeself-header.sh; do printf '#!/bin/sh\nexit 1\n' >"$THIRD/makeself/$f"; done

# 3. Configure and build only the libraries the ACL runtime API needs.
mkdir -p "$BUILD" "$WORK/ascend"
if ! cmake -S "$SRC" -B "$BUILD" -DENABLE_OPEN_SRC=True -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$WORK/out" -DASCEND_INSTALL_PATH="$WORK/ascend" -DCANN_3RD_LIB_PATH="$THIRD" \
  -DENABLE_UT=off -DENABLE_COV=off -DENABLE_GCOV=off -DENABLE_BUILD_DEVICE=OFF -DPACKAGE_TYPE=run \
  -DUSE_CXX11_ABI=1 -Wno-dev >"$WORK/configure.log" 2>&1; then
  fail "runtime configure (see $WORK/configure.log)"; exit 1
fi
if nice make -C "$BUILD" -j"$JOBS" acl_rt runtime_v100 platform ascend_dump >"$WORK/make.log" 2>&1; then
  pass "runtime built: libacl_rt.so, libruntime.so, libruntime_v100.so"
else
  fail "runtime build (see $WORK/make.log)"; exit 1
fi
fi

# 4. The emulation, in place of the generated driver stub; platform files where libplatform looks.
if ! (cd "$ROOT" && nice cargo build --release -p xstream-ascend-hal-sim >"$WORK/cargo.log" 2>&1); then
  fail "driver emulation build (see $WORK/cargo.log)"; exit 1
fi
rm -rf "$RUN" && mkdir -p "$RUN/lib64" "$RUN/data"
if [ -n "$PREBUILT" ]; then
  find "$PREBUILT" -maxdepth 1 -name '*.so' ! -name libascend_hal.so -exec cp -L {} "$RUN/lib64/" \;
  cp -r "$PREBUILT/../data/platform_config" "$RUN/data/platform_config"
else
  find "$BUILD" -name '*.so' ! -name libascend_hal.so -exec cp -L {} "$RUN/lib64/" \;
  cp -L "$LC/csec/lib/libc_sec.so" "$RUN/lib64/"
  cp -r "$SRC/src/platform/platform_config/cann" "$RUN/data/platform_config"
fi
cp "$TARGET/release/libascend_hal.so" "$RUN/lib64/"
pass "driver emulation built and installed as $RUN/lib64/libascend_hal.so"

# 5. The feasibility program.
gcc -O1 -Wall -o "$RUN/feasibility" "$ROOT/backends/ascend-hal-sim/c/feasibility.c" -ldl || { fail "feasibility program build"; exit 1; }
if LD_LIBRARY_PATH="$RUN/lib64" timeout 300 "$RUN/feasibility" "$RUN/lib64/libacl_rt.so" >"$WORK/feasibility.log" 2>&1; then
  grep -E '^(ok|PASS|FAIL)' "$WORK/feasibility.log"
  pass "feasibility: data round-tripped through the real runtime over the emulated driver"
else
  grep -E '^(ok|PASS|FAIL)' "$WORK/feasibility.log"
  fail "feasibility (log: $WORK/feasibility.log; rerun with XSTREAM_HAL_SIM_TRACE=1 ASCEND_SLOG_PRINT_TO_STDOUT=1 ASCEND_GLOBAL_LOG_LEVEL=1 for the call trace)"
fi

# 6. xstream's conformance suite, the bad-input cases and the examples against the real runtime
#    (opt-in: on 2026-11-25 checks still failed there, each traced in docs/simulators.md).
if [ "${CANN_CONFORM:-0}" = "1" ]; then
  if ! (cd "$ROOT" && nice cargo build -p xstream-cli >"$WORK/cargo-cli.log" 2>&1); then
    fail "xstream CLI build (see $WORK/cargo-cli.log)"
  else
    # Two emulated devices (XSTREAM_HAL_SIM_DEVICES; HAL_SIM_DEVICES=1 for one), so that the
    # checks between devices (peer_copy, foreign_buffers with device 1) run.
    HAL_SIM_DEVICES=${HAL_SIM_DEVICES:-2}
    echo "emulated devices for conformance: $HAL_SIM_DEVICES"
    # Each run must finish (no hang, no crash at exit: status 0, or 1 with failing checks) with
    # exactly the failures docs/simulators.md explains (KNOWN_FAILS, space-separated).
    for i in $(seq 1 "${CONFORM_REPEATS:-3}"); do
      LOG=$WORK/conform-$i.log
      XSTREAM_HAL_SIM_DEVICES="$HAL_SIM_DEVICES" XSTREAM_ACL_LIBRARY="$RUN/lib64/libacl_rt.so" LD_LIBRARY_PATH="$RUN/lib64" \
        timeout "${CONFORM_TIMEOUT:-300}" "$TARGET/debug/xstream" conform --backend ascend >"$LOG" 2>&1
      rc=$?
      [ "$i" = 1 ] && grep -E '^(PASS|FAIL|SKIP)' "$LOG"
      got=$(grep -oE '^FAIL [a-z0-9_]+' "$LOG" | cut -d' ' -f2 | sort | tr '\n' ' ' | sed 's/ $//')
      want=$(echo "$KNOWN_FAILS" | tr ' ' '\n' | sed '/^$/d' | sort | tr '\n' ' ' | sed 's/ $//')
      summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$LOG")
      if [ "$rc" -ge 2 ]; then
        fail "conformance run $i on the real runtime: exit status $rc (124: timeout after ${CONFORM_TIMEOUT:-300} s; 128+n: signal n) (log: $LOG)"
      elif [ -z "$summary" ]; then
        fail "conformance run $i on the real runtime: no summary line (log: $LOG)"
      elif [ "$got" != "$want" ]; then
        fail "conformance run $i on the real runtime: failing checks [$got], documented [$want] (log: $LOG)"
      else
        pass "conformance run $i on the real runtime: $summary; failing exactly as documented [$want] (log: $LOG)"
      fi
    done
  fi
  LOG=$WORK/bad-input.log
  if ! (cd "$ROOT" && XSTREAM_CANN_RUNTIME_DIR="$RUN/lib64" timeout "${CONFORM_TIMEOUT:-300}" nice cargo test \
    -p xstream-conformance --test bad_input ascend_real_runtime_refuses_bad_input -- --nocapture) >"$LOG" 2>&1; then
    fail "bad-input cases on the real runtime (log: $LOG)"
  elif grep -q '^bad input (ascend, real CANN runtime): [0-9]* cases' "$LOG"; then
    pass "$(grep -o '^bad input (ascend, real CANN runtime): [0-9]* cases' "$LOG") answered as documented (log: $LOG)"
  else
    fail "bad-input cases on the real runtime did not run (no count in $LOG)"
  fi
  # Physical memory of the virtual memory API shared between two processes (exporter and
  # importer, each a process of the runtime over the emulation).
  runtime_test vmm-share vmm_share \
    an_importer_process_sees_and_writes_the_exporters_bytes_on_the_real_runtime \
    "physical memory shared between processes on the real runtime"
  # Interprocess events: a producer and a consumer process, each the runtime over the
  # emulation, wait on each other's records (backends/ascend/tests/ipc_events.rs).
  runtime_test ipc-events ipc_events a_process_waits_on_anothers_record_on_the_real_runtime \
    "IPC events between processes on the real runtime"
  if ! (cd "$ROOT" && nice cargo build -p xstream-examples --bins >"$WORK/cargo-examples.log" 2>&1); then
    fail "examples build (see $WORK/cargo-examples.log)"
  else
    for ex in pipeline async_streams runtime_skeleton erased_runtime tensor expandable; do
      LOG=$WORK/example-$ex.log
      if XSTREAM_ACL_LIBRARY="$RUN/lib64/libacl_rt.so" LD_LIBRARY_PATH="$RUN/lib64" \
        timeout 120 "$TARGET/debug/$ex" --backend ascend >"$LOG" 2>&1 && grep -q '^verified: ' "$LOG"; then
        pass "example $ex on the real runtime: $(grep '^verified: ' "$LOG")"
      else
        fail "example $ex on the real runtime (log: $LOG)"
      fi
    done
    skip "example user_kernel on the real runtime: needs a kernel binary (no kernels run over the emulation)"
    skip "example data-parallel-allreduce on the real runtime: needs libhccl.so (HCCL is not built here)"
    skip "example ipc_producer_consumer on the real runtime: needs the builtin kernels (no kernels run over the emulation; its IPC events are checked by the step above)"
  fi
else
  skip "conformance on the real runtime: set CANN_CONFORM=1 (checks known to fail there; docs/cann-runtime.md)"
  skip "bad-input cases on the real runtime: set CANN_CONFORM=1"
  skip "examples on the real runtime: set CANN_CONFORM=1"
fi

echo "libraries: $RUN/lib64 (XSTREAM_ACL_LIBRARY=$RUN/lib64/libacl_rt.so with LD_LIBRARY_PATH=$RUN/lib64)"
[ "$FAILS" -eq 0 ] || exit 1
