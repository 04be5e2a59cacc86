#!/usr/bin/env bash
# gpu-bundle.sh: build everything the GPU machine needs, here (no GPU, no CUDA needed).
#
# The GPU flow is these two scripts:
#   1. here:  scripts/gpu-bundle.sh            -> gpu-bundle/ (git-ignored)
#        - `cargo test --workspace --no-run --features $FEATURES --message-format=json`
#          (falls back to `-p xstream-cuda` if the workspace build fails), every test
#          executable copied to gpu-bundle/bin/ (debug info stripped: carry is 64 MiB),
#          listed in gpu-bundle/manifest.tsv as  name <TAB> package <TAB> target;
#        - release `xstream` CLI and bench executables when those packages build (the
#          `gpu*` benches, `any_dispatch` and the `gpu_ipc` binary, in gpu-bundle/bench/);
#        - scripts/gpu-run.sh and any scripts/*.py bench script copied alongside.
#   2. there: the device `run` tool with carry ["gpu-bundle"] and the command
#        bash gpu-bundle/gpu-run.sh            (or: SANITIZE=1 bash gpu-bundle/gpu-run.sh: every test
#        binary under compute-sanitizer memcheck, the modules binary under racecheck and synccheck)
#      which writes logs under $OUT and prints a short PASS/FAIL summary last.
#
# Env: FEATURES (default "cuda"), CARGO_TARGET_DIR (default: cargo's), JOBS (default 2),
#      PICK (regex of executables to bundle; default: the CUDA ones, which are what the GPU adds).
set -uo pipefail
cd "$(dirname "$0")/.."
FEATURES="${FEATURES:-cuda}"
JOBS="${JOBS:-2}"
B=gpu-bundle
rm -rf "$B" && mkdir -p "$B/bin"
json="$(mktemp)"

echo "== building test executables (features: $FEATURES)"
if ! cargo test --workspace --no-run --features "$FEATURES" -j "$JOBS" --message-format=json >"$json" 2>"$B/build.log"; then
    echo "   workspace build failed (see $B/build.log); falling back to -p xstream-cuda"
    cargo test -p xstream-cuda --no-run -j "$JOBS" --message-format=json >"$json" 2>>"$B/build.log" || {
        echo "FATAL: xstream-cuda tests do not build"; tail -30 "$B/build.log"; exit 1; }
fi

python3 - "$json" "$B" "${PICK:-cuda}" <<'PY'
import json, os, re, shutil, sys
src, out, pick = sys.argv[1], sys.argv[2], re.compile(sys.argv[3])
rows = []
for line in open(src):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if not m.get("profile", {}).get("test"):
        continue
    exe = m["executable"]
    pid = m["package_id"]
    if "#" in pid:  # path+file:///dir#name@ver  or  path+file:///name#ver
        tail = pid.split("#", 1)[1]
        pkg = tail.split("@")[0] if "@" in tail else pid.split("#")[0].rstrip("/").split("/")[-1]
    else:  # "name ver (source)"
        pkg = pid.split(" ")[0]
    tgt = m["target"]["name"]
    kinds = ",".join(m["target"]["kind"])
    name = f"{pkg}--{tgt}--{kinds}".replace("/", "_").replace(",", "+")
    if not pick.search(name):
        continue
    shutil.copy2(exe, os.path.join(out, "bin", name))
    rows.append((name, pkg, tgt))
with open(os.path.join(out, "manifest.tsv"), "w") as f:
    for r in rows:
        f.write("\t".join(r) + "\n")
print(f"   {len(rows)} test executables")
PY
# The null driver test looks for its double (libxstream_cuda_null.so) next to itself. Built
# here so the copy is of this tree (target/debug keeps an older one otherwise: cargo test
# refreshes only the copy in deps/; a stale double failed the VMM part in GPU run 22).
cargo build -q -p xstream-cuda-null || { echo "   FAIL: building the null driver double"; exit 1; }
null_so="${CARGO_TARGET_DIR:-target}/debug/libxstream_cuda_null.so"
if [ -f "$null_so" ]; then cp "$null_so" "$B/bin/" && echo "   libxstream_cuda_null.so (the null driver test's double)"
else echo "   WARNING: $null_so missing: the null driver test will FAIL on the GPU machine"; fi

echo "== optional: release CLI and benches"
if cargo build --release -p xstream-cli -j "$JOBS" >>"$B/build.log" 2>&1; then
    tdir="${CARGO_TARGET_DIR:-target}"
    [ -x "$tdir/release/xstream" ] && cp "$tdir/release/xstream" "$B/bin/xstream" && echo "   xstream CLI"
else
    echo "   (xstream-cli does not build yet; skipped)"
fi
if cargo build --release -p xstream-examples --bins -j "$JOBS" >>"$B/build.log" 2>&1; then
    mkdir -p "$B/bin/examples"
    tdir="${CARGO_TARGET_DIR:-target}"
    # Every example of examples/src/bin (a fixed list left the expandable allocator out of
    # GPU run 22).
    for e in $(ls examples/src/bin | sed -n 's/\.rs$//p'); do
        [ -x "$tdir/release/$e" ] && cp "$tdir/release/$e" "$B/bin/examples/$e"
    done
    echo "   examples: $(ls "$B/bin/examples" | tr '\n' ' ')"
else
    echo "   (examples do not build; skipped)"
fi
if cargo bench -p xstream-benches --features nccl --no-run -j "$JOBS" --message-format=json >"$json.b" 2>>"$B/build.log"; then
    mkdir -p "$B/bench"
    python3 - "$json.b" "$B/bench" <<'PY'
import json, shutil, sys, os
for line in open(sys.argv[1]):
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"] and ("gpu" in m["target"]["name"] or m["target"]["name"] == "any_dispatch"):
        shutil.copy2(m["executable"], os.path.join(sys.argv[2], m["target"]["name"]))
        print("   bench", m["target"]["name"])
PY
else
    echo "   (benches do not build; skipped)"
fi
# gpu_ipc (it starts itself as a second process) and launch_profile (a sampling profile of
# the launch paths) are binaries of the benches package. launch_profile's unstripped copy stays
# in gpu-bundle-symbols/ (git-ignored): its offsets are named there with addr2line.
for bin in gpu_ipc launch_profile; do
    if cargo build --release -p xstream-benches --bin "$bin" -j "$JOBS" >>"$B/build.log" 2>&1; then
        mkdir -p "$B/bench"
        cp "${CARGO_TARGET_DIR:-target}/release/$bin" "$B/bench/$bin" && echo "   bench $bin"
    else
        echo "   ($bin does not build; skipped)"
    fi
done
rm -rf gpu-bundle-symbols && mkdir -p gpu-bundle-symbols
cp "$B/bench/launch_profile" gpu-bundle-symbols/ 2>/dev/null || true

# Debug info makes test binaries large; carry is limited to 64 MiB in all.
find "$B/bin" "$B/bench" -type f -exec strip --strip-debug {} \; 2>/dev/null || true
cp scripts/gpu-run.sh "$B/"
cp scripts/*.py "$B/" 2>/dev/null || true
rm -f "$json" "$json.b"
echo "== bundle: $(du -sh "$B" | cut -f1)"
cat "$B/manifest.tsv"
size=$(du -sm "$B" | cut -f1)
[ "$size" -lt 64 ] || echo "WARNING: bundle is ${size} MiB; carry allows 64 MiB"
