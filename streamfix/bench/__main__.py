"""``python -m streamfix.bench``: the benchmarks (docs/benchmarks.md), by their options."""

from __future__ import annotations

import argparse
import sys
import time

from .inprocess import bench_in_process
from .mitm import bench_floors, bench_mitmdump
from .report import report, report_floors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streamfix.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=None, help="runs per figure (default 9 in process, 5 in mitmdump)")
    ap.add_argument("--quick", action="store_true", help="3 runs each, for a smoke run")
    ap.add_argument("--in-process-only", action="store_true", help="skip the mitmdump measurement")
    ap.add_argument("--no-paced", action="store_true", help="skip the paced mitmdump runs (the slowest part)")
    ap.add_argument("--memory-only", action="store_true", help="only the RSS figure (d)")
    ap.add_argument(
        "--capacity",
        action="store_true",
        help="latency, capacity and RSS under many concurrent streams instead (python -m streamfix.bench.capacity)",
    )
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="instructions per upstream event inside mitmdump under valgrind's callgrind "
        "(python -m streamfix.bench.instructions; the primary figures)",
    )
    ap.add_argument(
        "--floors",
        action="store_true",
        help="only the floors between stream=True and the repair addon in mitmdump (streamfix/bench/addon.py)",
    )
    a, rest = ap.parse_known_args(argv)
    if a.capacity:
        from . import capacity

        return capacity.main(rest + (["--quick"] if a.quick else []))
    if a.instructions:
        from . import instructions

        return instructions.main(rest + (["--floors"] if a.floors else []) + (["--quick"] if a.quick else []))
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    rin = a.repeats or (3 if a.quick else 9)
    rmitm = a.repeats or (3 if a.quick else 5)
    t0 = time.monotonic()
    if a.floors:
        print(report_floors(bench_floors(rmitm), rmitm))
        print(f"\n(bench took {time.monotonic() - t0:.0f} s)")
        return 0
    inproc = [] if a.memory_only else bench_in_process(rin)
    mitm = None if a.in_process_only else bench_mitmdump(rmitm, paced=not a.no_paced, memory_only=a.memory_only)
    print(report(inproc, mitm, rin, rmitm))
    print(f"\n(bench took {time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
