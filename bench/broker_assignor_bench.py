"""Timing of the broker-side assignor (assignor/java/broker-assignor) beside Kafka's built-in ``sticky``.

One streams group of ``--tasks`` tasks (ten subtopologies, half stateful with one standby) over ``--members``
single-thread processes, the last tenth of them new; a signed plan moves every tenth task to them. Both assignors
run on the same GroupSpec, interleaved so both see the same machine load, after a JIT warm-up. Prints one JSON line
per assignor (wall and thread-CPU median/p90 of ``assign``), then a table with the load average.

    .venv/bin/python bench/broker_assignor_bench.py [--tasks 1000] [--members 100] [--iterations 300]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
JAVA_DIR = ROOT / "assignor" / "java"
MODULE = JAVA_DIR / "broker-assignor"
TARGET_MS = 5.0


def classpath() -> str:
    """Compile the module and its tests (incremental, offline) and return the test classpath."""
    out = MODULE / "target" / "bench.classpath"
    build = subprocess.run(
        [
            *("mvn", "-q", "-B", "-o", "-Dstyle.color=never", "-pl", "broker-assignor", "-am"),
            *("test-compile", "dependency:build-classpath", "-Dmdep.includeScope=test"),
            "-Dmdep.outputFile=target/bench.classpath",
        ],
        cwd=JAVA_DIR,
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        sys.exit(f"building {MODULE.name} failed:\n{build.stdout}{build.stderr}")
    deps = out.read_text().strip()
    return os.pathsep.join([str(MODULE / "target" / "classes"), str(MODULE / "target" / "test-classes"), deps])


def run(tasks: int, members: int, iterations: int) -> list[dict[str, Any]]:
    main = "io.rebalanceplanner.broker.AssignBench"
    done = subprocess.run(
        ["java", "-cp", classpath(), main, str(tasks), str(members), str(iterations)],
        check=True,
        capture_output=True,
        text=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000, choices=range(10, 100_001), metavar="10..100000")
    parser.add_argument("--members", type=int, default=100, choices=range(2, 10_001), metavar="2..10000")
    parser.add_argument("--iterations", type=int, default=300, choices=range(10, 100_001), metavar="10..100000")
    args = parser.parse_args()
    rows = run(args.tasks, args.members, args.iterations)
    load = os.getloadavg()
    for row in rows:
        row["load_avg_1m"] = round(load[0], 2)
        print(json.dumps(row), flush=True)
    title = f"assign() on {args.tasks} tasks, {args.members} members"
    table = Table(title=f"{title} (load {load[0]:.2f} on {os.cpu_count()} cores)")
    for col in ("mode", "assignor", "median ms", "p90 ms", "max ms", "CPU median ms", "CPU p90 ms", "warm-ups"):
        table.add_column(col, justify="left" if col in ("mode", "assignor") else "right")
    for r in rows:
        table.add_row(
            *(r["mode"], r["assignor"], f"{r['median_ms']:.2f}", f"{r['p90_ms']:.2f}", f"{r['max_ms']:.2f}"),
            *(f"{r['cpu_median_ms']:.2f}", f"{r['cpu_p90_ms']:.2f}", str(r["warmups"])),
        )
    console = Console(width=120)
    console.print(table)
    ours = next(r for r in rows if r["mode"] == "plan")
    verdict = "meets" if ours["median_ms"] <= TARGET_MS else "misses"
    console.print(
        f"plan-following median {ours['median_ms']:.2f} ms wall / {ours['cpu_median_ms']:.2f} ms CPU: "
        f"{verdict} the {TARGET_MS:g} ms target on wall time"
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
