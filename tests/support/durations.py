"""Seconds per test module from a JUnit XML report (``pytest --junitxml``): the weights tests/conftest.py orders
the xdist groups by, and a prediction of a parallel run's wall time.

``python -m tests.support.durations JUNIT [--write] [--workers N]``: prints each group's seconds and the makespan
of longest-first list scheduling on N workers; ``--write`` stores the modules' seconds in tests/durations.json."""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from xml.etree import ElementTree

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
MAX_SECONDS = 86_400.0  # one test case longer than a day is a broken report, not a duration


def module_seconds(junit: Path, cases: dict[str, int] | None = None) -> dict[str, float]:
    """Module path (``tests/system/test_dag_run.py``) -> the seconds its test cases took (setup, call, teardown);
    ``cases``, if given, gets each module's number of test cases."""
    seconds: dict[str, float] = defaultdict(float)
    counted: dict[str, int] = defaultdict(int) if cases is None else cases
    for case in ElementTree.parse(junit).iter("testcase"):
        classname, raw = case.get("classname", ""), case.get("time", "0")
        try:
            took = float(raw)
        except ValueError:
            raise ValueError(f"{junit}: test case {case.get('name')!r} has a non-numeric time {raw!r}") from None
        if not 0 <= took <= MAX_SECONDS:
            raise ValueError(f"{junit}: test case {case.get('name')!r} has time {took} s, outside 0..{MAX_SECONDS:g}")
        # classname is the module's dotted path, then a class if any: tests.unit.test_x(.TestClass)
        parts = classname.split(".")
        names = [i for i, part in enumerate(parts) if part.startswith("test_")]
        if not names:
            raise ValueError(f"{junit}: test case {case.get('name')!r} has no test module in {classname!r}")
        module = "/".join(parts[: names[0] + 1]) + ".py"
        seconds[module] += took
        counted[module] = counted.get(module, 0) + 1
    return dict(seconds)


def makespan(weights: list[float], workers: int) -> tuple[float, list[float]]:
    """Wall seconds of handing the weights, longest first, to whichever of ``workers`` is free first; and each
    worker's total."""
    loads = [0.0] * workers
    heap = [(0.0, w) for w in range(workers)]
    for weight in sorted(weights, reverse=True):
        load, worker = heapq.heappop(heap)
        loads[worker] = load + weight
        heapq.heappush(heap, (loads[worker], worker))
    return max(loads), loads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.durations", description=__doc__)
    parser.add_argument("junit", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--groups", type=Path, help="JSON: group name -> its modules (default: one per module)")
    parser.add_argument(
        "--collected",
        type=Path,
        help="`pytest --collect-only -q` output of the same run: modules the report holds only some tests of (an "
        "interrupted run) are left out",
    )
    parser.add_argument("--write", action="store_true", help=f"store the modules' seconds in {DURATIONS}")
    args = parser.parse_args(argv)
    if not 1 <= args.workers <= 64:
        parser.error(f"--workers must be 1..64, not {args.workers}")
    cases: dict[str, int] = {}
    seconds = module_seconds(args.junit, cases)
    if args.collected:
        lines = args.collected.read_text(encoding="utf-8").splitlines()
        expected = Counter(line.split("::", 1)[0] for line in lines if "::" in line)
        partial = sorted(m for m in seconds if cases[m] < expected.get(m, 0))
        for module in partial:
            del seconds[module]
        print(f"left out {len(partial)} module(s) the report holds only some tests of: {', '.join(partial)}")
    grouped: dict[str, float] = {m: s for m, s in seconds.items()}
    if args.groups:
        for group, modules in json.loads(args.groups.read_text(encoding="utf-8")).items():
            grouped[group] = sum(grouped.pop(m, 0.0) for m in modules)
    total = sum(grouped.values())
    wall, loads = makespan(list(grouped.values()), args.workers)
    for group, took in sorted(grouped.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{took:8.1f} s  {group}")
    print(f"{len(grouped)} groups, {total:.0f} s serial; {args.workers} workers: makespan {wall:.0f} s, loads", end="")
    print(" " + ", ".join(f"{load:.0f}" for load in loads))
    if args.write:
        rounded = {m: round(s, 1) for m, s in sorted(seconds.items())}
        DURATIONS.write_text(json.dumps(rounded, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {DURATIONS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
