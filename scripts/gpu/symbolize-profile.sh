#!/usr/bin/env bash
# symbolize-profile.sh: turns launch_profile's offsets (launch_profile_offsets.tsv, samples in
# the bench's own binary by offset) into a table of functions per variant, with addr2line
# over the unstripped copy of the same build (gpu-bundle-symbols/launch_profile, kept by
# scripts/gpu-bundle.sh).
#
#   bash scripts/gpu/symbolize-profile.sh RUN_DIR [SYMBOLS] [TOP]
#
# Reads RUN_DIR/launch_profile.md (its first line: rounds, launches per round and the sampling
# period) and RUN_DIR/launch_profile_offsets.tsv (variant, offset, samples and, from the copy
# variants on, the variant's operations over the run, which then replace rounds x launches, so
# run folders recorded before that column still read); writes RUN_DIR/launch_profile_functions.md:
# per variant, the TOP (default 8) functions by samples. A sample is counted for the first
# frame of the inline chain that is xstream's code (a crate named xstream_* or the bench
# itself), so the standard library's inlined helpers are charged to their caller; ns per
# operation = samples x period / operations. Needs binutils' addr2line.
set -euo pipefail
run=${1:?run folder}
sym=${2:-gpu-bundle-symbols/launch_profile}
top=${3:-8}
md="$run/launch_profile.md"
tsv="$run/launch_profile_offsets.tsv"
for f in "$md" "$tsv" "$sym"; do [ -f "$f" ] || { echo "FAIL symbolize: $f missing" >&2; exit 1; }; done
head1=$(head -1 "$md")
rounds=$(sed -n 's/.* \([0-9][0-9]*\) rounds of \([0-9][0-9]*\) launches.*/\1/p' <<<"$head1")
per=$(sed -n 's/.* \([0-9][0-9]*\) rounds of \([0-9][0-9]*\) launches.*/\2/p' <<<"$head1")
period_us=$(grep -m1 -o 'every [0-9]* µs' "$md" | grep -o '[0-9]*')
[ -n "$rounds" ] && [ -n "$per" ] && [ -n "$period_us" ] || { echo "FAIL symbolize: cannot read rounds/period from $md" >&2; exit 1; }
launches=$((rounds * per))
out="$run/launch_profile_functions.md"
{
    echo "# launch_profile: samples in xstream's code by function ($(basename "$sym") symbolized with addr2line)"
    echo
    echo "Period ${period_us} µs, ${launches} launches per launch variant (the others: their operations in the offsets file); ns per operation = samples × period / operations."
    echo
    echo "| variant | function | samples | ns per operation |"
    echo "|---|---|---:|---:|"
    tail -n +2 "$tsv" | while IFS=$'\t' read -r variant off n ops; do
        fn=$(addr2line -f -C -i -e "$sym" "$off" | awk 'NR % 2 == 1' |
            grep -m1 -E '^(<)?(xstream_|launch_profile)' || echo '(other)')
        fn=${fn%%::\{\{closure\}\}*}
        printf '%s\t%s\t%s\t%s\n' "$variant" "$fn" "$n" "${ops:-$launches}"
    done | awk -F'\t' -v top="$top" -v period="$period_us" '
        { k = $1 "\t" $2; s[k] += $3; ops[$1] = $4; if (!($1 in seen)) { seen[$1] = 1; order[++nv] = $1 } }
        END {
            for (i = 1; i <= nv; i++) {
                v = order[i]; m = 0
                for (k in s) { split(k, p, "\t"); if (p[1] == v) { m++; key[m] = k; val[m] = s[k] } }
                for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++)
                    if (val[b] > val[a]) { t = val[a]; val[a] = val[b]; val[b] = t; t = key[a]; key[a] = key[b]; key[b] = t }
                for (a = 1; a <= m && a <= top; a++) {
                    split(key[a], p, "\t"); f = p[2]; gsub(/\|/, "\\|", f)
                    printf "| %s | `%s` | %d | %.0f |\n", v, f, val[a], val[a] * period * 1000 / ops[v]
                }
            }
        }'
} >"$out"
echo "PASS symbolize: $(grep -c '^| .* | `' "$out") rows in $out"
