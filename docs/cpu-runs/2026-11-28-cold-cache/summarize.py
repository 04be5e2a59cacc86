#!/usr/bin/env python3
"""Medians and ranges of the "xstream - raw ns" column per row of the CPU-cost tables in
before.log and after.log (this folder): the event-callback run's summarize.py, with the launch
and stream-creation rows added to its rows; prints a Markdown table."""
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
src = (here.parent / "2026-11-28-event-callback" / "summarize.py").read_text()
extra = '    "launch_kernel",\n    "launch builder",\n    "launch(Kernel",\n    "stream create+destroy",\n'
src = src.replace("ROWS = (\n", "ROWS = (\n" + extra, 1)
sys.argv = [sys.argv[0], sys.argv[1] if len(sys.argv) > 1 else str(here)]
exec(compile(src, "summarize.py", "exec"), {"__name__": "__main__"})
