#!/usr/bin/env python3
"""Medians and ranges of the "xstream - raw ns" column per row of the CPU-cost tables in
before.log and after.log (this folder), over the runs in each; prints a Markdown table."""
import re
import statistics
import sys
from pathlib import Path

ROWS = (
    "event create+destroy",
    "cudarc safe new_event",
    "host callback enqueue",
    "idle stream query",
    "idle stream synchronize",
)


def collect(path):
    rows = {}
    for line in Path(path).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not cells[0].startswith(ROWS):
            continue
        if not re.fullmatch(r"[+-]?\d+", cells[4]):
            continue
        rows.setdefault(cells[0], []).append(int(cells[4]))
    return rows


def fmt(v):
    return f"{statistics.median(v):+.0f} ({min(v):+d} to {max(v):+d})"


def main():
    here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    before, after = collect(here / "before.log"), collect(here / "after.log")
    print("| operation | xstream − raw ns: before | after | change of the median | runs (before / after) |")
    print("|---|---:|---:|---:|---|")
    for label, b in before.items():
        a = after.get(label, [])
        if not a:
            continue
        change = statistics.median(a) - statistics.median(b)
        print(f"| {label} | {fmt(b)} | {fmt(a)} | {change:+.0f} | {len(b)} / {len(a)} |")


main()
