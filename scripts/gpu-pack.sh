#!/usr/bin/env bash
# gpu-pack.sh: compress a bundle made by scripts/gpu-bundle.sh under the device tool's carry
# limit (64 MiB for everything carried).
#
#   bash scripts/gpu-pack.sh [DIR]          # DIR defaults to gpu-bundle; writes DIR.tar.xz
#   STRIP=all bash scripts/gpu-pack.sh      # also drop symbol tables (smaller; backtraces
#                                           # then show offsets only)
#
# Steps: every executable and shared object under DIR is stripped in a copy (`strip
# --strip-debug` by default: function names stay for backtraces; DIR itself is left as it is,
# so a local binary with full debug info remains for symbolizing), then `tar | xz -6 -T0`.
# Prints the sizes before and after, and the carry/command pair for the device `run` tool:
#     carry ["DIR.tar.xz"], command: tar xJf DIR.tar.xz && bash DIR/gpu-run.sh
# Exit status 1 (with FAIL) when DIR is missing or the archive is not under the limit.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-gpu-bundle}"
DIR="${DIR%/}"
LIMIT_MIB=64
if [ ! -d "$DIR" ]; then echo "FAIL gpu-pack: $DIR is not a directory (run scripts/gpu-bundle.sh first)"; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -a "$DIR" "$tmp/"
base=$(basename "$DIR")
mode=--strip-debug
[ "${STRIP:-}" != all ] || mode=--strip-all
n=0
while IFS= read -r -d '' f; do
    if head -c 4 "$f" 2>/dev/null | grep -q 'ELF'; then
        strip "$mode" "$f" 2>/dev/null && n=$((n + 1))
    fi
done < <(find "$tmp/$base" -type f -print0)
before=$(du -sm "$DIR" | cut -f1)
stripped=$(du -sm "$tmp/$base" | cut -f1)
out="$DIR.tar.xz"
tar -C "$tmp" -cf - "$base" | xz -6 -T0 >"$out.part" && mv "$out.part" "$out" || {
    echo "FAIL gpu-pack: tar | xz failed"; rm -f "$out.part"; exit 1; }
bytes=$(stat -c %s "$out")
mib=$(( (bytes + 1048575) / 1048576 ))
echo "gpu-pack: $DIR ${before} MiB -> ${n} ELF files stripped ($mode) ${stripped} MiB -> $out ${mib} MiB"
if [ "$bytes" -ge $((LIMIT_MIB * 1048576)) ]; then
    echo "FAIL gpu-pack: $out is ${mib} MiB, not under the ${LIMIT_MIB} MiB carry limit (PICK fewer binaries, or STRIP=all)"
    exit 1
fi
echo "PASS gpu-pack: under the ${LIMIT_MIB} MiB carry limit"
echo "device run: carry [\"$out\"], command: tar xJf $(basename "$out") && bash $base/gpu-run.sh"
