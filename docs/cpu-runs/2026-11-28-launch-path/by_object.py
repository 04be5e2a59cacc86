#!/usr/bin/env python3
"""Self instructions (Ir) of a callgrind profile, summed by object file and per launch.

Usage: by_object.py <callgrind.out> <launches>
Prints one line per object: its Ir, and Ir per launch.
"""
import re
import sys

path, launches = sys.argv[1], int(sys.argv[2])
names = {}
ob = "?"
totals = {}
skip_next = False


def name_of(val):
    m = re.match(r"\((\d+)\)(?: (.*))?", val)
    if not m:
        return val
    if m.group(2) is not None:
        names[m.group(1)] = m.group(2)
    return names.get(m.group(1), val)


with open(path) as f:
    for line in f:
        line = line.rstrip("\n")
        if skip_next:
            skip_next = False
            continue
        if line.startswith("ob="):
            ob = name_of(line[3:])
        elif line.startswith("cob="):
            name_of(line[4:])
        elif line.startswith("calls="):
            skip_next = True
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            parts = line.split()
            if len(parts) >= 2:
                totals[ob] = totals.get(ob, 0) + int(parts[1])
all_ir = sum(totals.values())
for o, ir in sorted(totals.items(), key=lambda x: -x[1]):
    print(f"{ir:>12} {ir / launches:>10.1f}  {o}")
print(f"{all_ir:>12} {all_ir / launches:>10.1f}  (all)")
