#!/usr/bin/env bash
# Line count of the library source (*.rs under crates/*/src and backends/*/src) at two git revs,
# per crate and in total, with the difference. Reads the revs through git, so any rev works and
# the working tree is not touched.
# Usage: scripts/src-lines.sh [OLD_REV] [NEW_REV]   (defaults: OLD_REV=HEAD, NEW_REV=HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:-HEAD}
new=${2:-HEAD}

# Prints "crate lines" for every library source file at rev $1.
count() {
    git ls-tree -r --name-only "$1" -- crates backends |
        grep -E '^(crates|backends)/[^/]+/src/.*\.rs$' |
        while read -r f; do
            printf '%s %s\n' "$(cut -d/ -f1-2 <<<"$f")" "$(git show "$1:$f" | wc -l)"
        done
}

git rev-parse --verify -q "$old^{commit}" >/dev/null || { echo "not a commit: $old" >&2; exit 1; }
git rev-parse --verify -q "$new^{commit}" >/dev/null || { echo "not a commit: $new" >&2; exit 1; }
printf '%-28s %10s %10s %8s\n' crate "$old" "$new" diff
{ count "$old" | sed 's/^/old /'; count "$new" | sed 's/^/new /'; } | awk '
    { lines[$1, $2] += $3; crates[$2] = 1; total[$1] += $3 }
    END {
        for (c in crates)
            printf "%-28s %10d %10d %+8d\n", c, lines["old", c], lines["new", c], lines["new", c] - lines["old", c]
        printf "~total %d %d\n", total["old"], total["new"]
    }' | sort | awk '/^~total/ { printf "%-28s %10d %10d %+8d\n", "total", $2, $3, $3 - $2; next } { print }'
