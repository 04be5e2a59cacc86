#!/usr/bin/env python3
"""Sums, per called function, the inclusive instructions and calls of the `=> function (Nx)`
lines of `callgrind_annotate --inclusive=yes --tree=calling` (stdin), for the host-callback
functions; prints one line each."""
import re,sys
agg={}
for line in sys.stdin:
    m=re.match(r"\s*([0-9,]+) \([ 0-9.]+%\)\s+=>\s+[^:]*:(.+) \(([0-9,]+)x\)\s*$",line)
    if m:
        n=int(m.group(1).replace(",","")); f=m.group(2).split(" [")[0]; c=int(m.group(3).replace(",",""))
        a=agg.setdefault(f,[0,0]); a[0]+=n; a[1]+=c
for f,(n,c) in sorted(agg.items()):
    if re.search(r"enqueue_slot$|PendingCallbacks::(track|slot|pending|any_pending|fail_all)$|host_fn_trampoline$|CallbackSlot::fire$|track_pending::\{\{closure\}\}$|track_pending$",f):
        print(f"{f}: {n} instructions, {c} calls, {n/c:.0f} per call")
