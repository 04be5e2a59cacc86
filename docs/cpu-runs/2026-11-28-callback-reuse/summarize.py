#!/usr/bin/env python3
"""Medians and ranges over the runs in this folder's logs (README.md): the null-driver test's
host-callback row ("xstream - raw ns", before.log / after.log) and launch_profile's
host-callback variants (profile-before.log / profile-after.log: ns per operation, the samples'
xstream-binary and other ns, and the enqueuing and driver threads' CPU ns per operation).
Prints Markdown tables."""
import re
import statistics
import sys
from pathlib import Path


def fmt(v):
    return f"{statistics.median(v):.0f} ({min(v):.0f} to {max(v):.0f})" if v else "-"


def sfmt(v):
    return f"{statistics.median(v):+.0f} ({min(v):+.0f} to {max(v):+.0f})" if v else "-"


def null_rows(path):
    rows = {}
    for line in Path(path).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("host callback enqueue") and re.fullmatch(r"[+-]?\d+", cells[4]):
            rows.setdefault(cells[0], []).append(int(cells[4]))
    return rows


def profile_rows(path):
    rows = {}
    for line in Path(path).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 8 or not cells[0].startswith("host callback enqueue"):
            continue
        m = re.match(r"(\d+) ", cells[1])
        enq = re.search(r"enqueuing thread: (\d+) ns", cells[7])
        drv = re.search(r"xnull-host-fn: (\d+) ns", cells[7])
        r = rows.setdefault(cells[0], {"ns": [], "bin": [], "other": [], "enq": [], "drv": []})
        r["ns"].append(int(m.group(1)))
        r["bin"].append(int(cells[3]))
        r["other"].append(int(cells[5]))
        r["enq"].append(int(enq.group(1)))
        r["drv"].append(int(drv.group(1)))
    return rows


def main():
    here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    b, a = null_rows(here / "before.log"), null_rows(here / "after.log")
    print("Null-driver test (`more_timing`): xstream − raw ns per enqueue, median (range) over the runs\n")
    print("| operation | before | after | change of the median | runs (before / after) |")
    print("|---|---:|---:|---:|---|")
    for label, bv in b.items():
        av = a.get(label, [])
        change = statistics.median(av) - statistics.median(bv)
        print(f"| {label} | {sfmt(bv)} | {sfmt(av)} | {change:+.0f} | {len(bv)} / {len(av)} |")
    pb, pa = profile_rows(here / "profile-before.log"), profile_rows(here / "profile-after.log")
    print("\nlaunch_profile, `LP_ONLY=\"host callback\"`: per enqueue, median (range) of the runs' medians\n")
    print("| variant | side | ns per operation | xstream binary ns | other ns | enqueuing thread CPU ns | xnull-host-fn CPU ns | runs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label in list(pb) + [l for l in pa if l not in pb]:
        for side, rows in (("before", pb), ("after", pa)):
            r = rows.get(label)
            if not r:
                continue
            print(f"| {label} | {side} | {fmt(r['ns'])} | {fmt(r['bin'])} | {fmt(r['other'])} | {fmt(r['enq'])} | {fmt(r['drv'])} | {len(r['ns'])} |")

    raw = "host callback enqueue, empty (2000): cuLaunchHostFunc"
    print("\nlaunch_profile: each variant's ns per operation minus raw `cuLaunchHostFunc`'s in the same run, median (range) over the runs\n")
    print("| variant | before | after | change of the median |")
    print("|---|---:|---:|---:|")
    for label in list(pb) + [l for l in pa if l not in pb]:
        if label == raw:
            continue
        d = {}
        for side, rows in (("before", pb), ("after", pa)):
            r = rows.get(label)
            d[side] = [x - y for x, y in zip(r["ns"], rows[raw]["ns"])] if r else []
        change = (
            f"{statistics.median(d['after']) - statistics.median(d['before']):+.0f}"
            if d["before"] and d["after"]
            else "-"
        )
        print(f"| {label} | {sfmt(d['before'])} | {sfmt(d['after'])} | {change} |")


main()
