#!/usr/bin/env python3
"""Library source lines added by each issue's commits between two revs.

Library source is what scripts/src-lines.sh counts: every *.rs file under crates/*/src and
backends/*/src (test modules inside those files included). A commit's delta is its diff against
its first parent over those files (lines added minus lines removed, renames as a removal and
an addition). Every non-merge commit of OLD..NEW is counted once and attributed, in this order:

1. the issue its message names ("issue 33", "issue #33", "issues 27 and 33": the first one);
2. else the issue most often named by the other commits of the branch that a merge on NEW's
   first-parent line brought it in with (ties: the lower number);
3. else the first row of KEYWORDS whose pattern its subject matches;
4. else "unattributed".

The sum of the commits' deltas differs from the whole diff by what merges changed themselves
(conflict resolutions); that difference is its own row, so the table adds up to the diff.

Usage: scripts/lines-by-issue.py [OLD] [NEW] [--commits]
(defaults: b7eabbd, the commit issue 33 was filed at, and HEAD; --commits also lists every
commit with its delta and attribution). Reads git only; the output depends on the revs alone.
"""
import collections
import re
import subprocess
import sys

# Subject patterns for commits that name no issue, from the issues' titles; the first match
# wins. Kept short on purpose: a commit no row fits stays unattributed.
KEYWORDS = [
    # issue 30: rooms of a readable size (file splits), figures from their logs.
    (r"\bsplit\b|render-tables|docs/runs\.md|ledger", "30"),
    # issue 28: virtual memory and the expandable allocator.
    (r"\bvmm\b|virtual memory|VirtualMemory|expandable|physical|shareable", "28"),
    # issue 27: what a tensor library needs.
    (r"tensor|upload|random fill|Kernel::Random|Capabilities asked|BF16|INF_NAN", "27"),
    # issue 31: the emulated driver under the vendor's runtime.
    (r"ascend-hal-sim|HAL emulation|driver emulation|emulated driver|cann-runtime", "31"),
    # issue 29: hot paths at the driver's speed, steady on the GPU.
    (r"hot-path|hot path|null[-_ ]driver|cuda-null|cuda keep|GPU run|launch_profile|launch_count|keep-alive|"
     r"keep list|KEEP_FLUSH|cold-cache|memcheck|\bexit\b|fence|KernelArg::value|stream-ordered|watcher|"
     r"spare slot|pending list", "29"),
    # issue 33: the checked layer, shared machinery, errors, names, weight.
    (r"Impl\b|_impl\b|two layers|checked layer|checks_once|callback gate|lock helper|use set|"
     r"erased layer|erasable|forward!|dispatch!|written once|one table|out of core|deprecat|"
     r"Error::Native|WrongBackend|src-lines|lines-by-issue", "33"),
    # issue 27 again: the erased path and interprocess use.
    (r"erased|interprocess|\bipc\b", "27"),
    # issue 32: cluster launchers and the rendezvous.
    (r"slurm|\bMPI\b|launcher|rendezvous", "32"),
]

SRC = re.compile(r"^(crates|backends)/[^/]+/src/.*\.rs$")
ISSUE = re.compile(r"\bissues? #?(\d+)", re.IGNORECASE)


def git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def delta(a, b):
    """Library lines added minus removed from rev a to rev b."""
    n = 0
    for line in git("diff", "--numstat", "--no-renames", a, b, "--", "crates", "backends").splitlines():
        added, removed, path = line.split("\t", 2)
        if SRC.match(path) and added != "-":
            n += int(added) - int(removed)
    return n


def named_issue(message):
    m = ISSUE.search(message)
    return m.group(1) if m else None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    old = args[0] if args else "b7eabbd"
    new = args[1] if len(args) > 1 else "HEAD"
    show_commits = "--commits" in sys.argv
    old_c = git("rev-parse", "--verify", old + "^{commit}").strip()
    new_c = git("rev-parse", "--verify", new + "^{commit}").strip()

    commits = git("rev-list", "--no-merges", "--reverse", f"{old_c}..{new_c}").split()
    message = {c: git("log", "-1", "--format=%B", c) for c in commits}
    subject = {c: message[c].splitlines()[0] if message[c] else "" for c in commits}

    # The branch each commit came in with: merges on NEW's first-parent line.
    branch_of = {}
    for m in git("rev-list", "--first-parent", "--merges", f"{old_c}..{new_c}").split():
        parents = git("rev-list", "--parents", "-n", "1", m).split()[1:]
        if len(parents) < 2:
            continue
        members = git("rev-list", "--no-merges", parents[1], "--not", parents[0], old_c).split()
        for c in members:
            branch_of.setdefault(c, members)

    def attribute(c):
        n = named_issue(message[c])
        if n:
            return n, "named"
        named = collections.Counter(filter(None, (named_issue(message.get(o, "")) for o in branch_of.get(c, []))))
        if named:
            top = max(named.values())
            return min((k for k, v in named.items() if v == top), key=int), "branch"
        for pattern, issue in KEYWORDS:
            if re.search(pattern, subject[c], re.IGNORECASE):
                return issue, "keyword"
        return "unattributed", ""

    rows = collections.defaultdict(lambda: [0, 0, 0])  # delta, commits, commits changing lines
    listed = []
    for c in commits:
        d = delta(c + "^", c)
        who, how = attribute(c)
        r = rows[who]
        r[0] += d
        r[1] += 1
        r[2] += d != 0
        listed.append((c[:7], d, who, how, subject[c]))
    total = delta(old_c, new_c)
    rows["merge resolutions"][0] = total - sum(r[0] for r in rows.values())

    def order(k):
        return (0, int(k)) if k.isdigit() else (1, k)

    print(f"library lines by issue, {old_c[:7]}..{new_c[:7]} ({len(commits)} commits)")
    print()
    print("| issue | commits | commits changing library lines | net library lines |")
    print("|---|---:|---:|---:|")
    for k in sorted(rows, key=order):
        d, n, changing = rows[k]
        name = f"issue {k}" if k.isdigit() else k
        print(f"| {name} | {n} | {changing} | {d:+d} |")
    print(f"| **total** (= scripts/src-lines.sh {old_c[:7]} {new_c[:7]}) | {len(commits)} | | {total:+d} |")
    if show_commits:
        print()
        for c, d, who, how, s in listed:
            print(f"{c} {d:+6d} {who:>12} {how:8} {s[:100]}")


if __name__ == "__main__":
    main()
