"""Footprint of one reference-app JVM (assignor/java/reference-app) under a JVM/Streams profile: memory and CPU.

Three instances of a demo-sized group (6 partitions, 1 standby, 1,000 changelog records per counting task) on the
embedded broker. Per profile, per JVM: CPU seconds to start and settle, then idle for ``--idle-s`` (RSS, PSS, CPU
%), then while restoring: the third instance is killed, its state directory wiped, and it restarts empty, so it
restores (warmups as standbys, then actives); RSS peak and CPU % over ``--restore-s``. One JSON line per profile,
then a table. Profiles: ``default`` (StreamsFleetConfig's own: -Xmx384m, serial GC, RocksDB's per-store memory;
what the tests and streams_bench run) and ``light`` (jobs.local.streams_fleet.LIGHT: what the demo runs).

    .venv/bin/python bench/streams_footprint.py [--profiles default,light] [--idle-s 30] [--restore-s 40]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assignor import AssignmentConfigs
from jobs.local.broker import EmbeddedBroker
from jobs.local.streams_fleet import LIGHT, StreamsFleet, StreamsFleetConfig, processed_once
from jobs.polling import wait_until

PARTITIONS, RECORDS = 6, 6_000  # the demo's live group: ~1,000 changelog records per counting task
MB = 1024 * 1024


def profile(name: str, base: StreamsFleetConfig) -> StreamsFleetConfig:
    if name == "default":
        return dataclasses.replace(base, heap_mb=384, jvm_options=("-XX:+UseSerialGC",), rocksdb_memory_mb=None)
    if name == "light":
        return LIGHT.apply(base)
    raise ValueError(f"unknown profile {name!r}: expected default or light")


def _cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def _sample(processes: dict[str, psutil.Process], seconds: float) -> tuple[dict[str, int], dict[str, float]]:
    """Peak RSS (bytes) and CPU % of each process over ``seconds``, sampled twice a second."""
    before = {n: _cpu_s(p) for n, p in processes.items()}
    peak = {n: 0 for n in processes}
    end = time.monotonic() + seconds
    started = time.monotonic()
    while time.monotonic() < end:
        for n, p in processes.items():
            peak[n] = max(peak[n], p.memory_info().rss)
        time.sleep(0.5)  # a sampling period, not synchronisation
    elapsed = time.monotonic() - started
    cpu = {n: 100 * (_cpu_s(p) - before[n]) / elapsed for n, p in processes.items()}
    return peak, cpu


def run(name: str, idle_s: float, restore_s: float, console: Console) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker() as broker:
        base = StreamsFleetConfig(
            broker.bootstrap, Path(tmp) / "fleet", f"footprint-{name}", PARTITIONS,
            configs=AssignmentConfigs(num_standby_replicas=1), plan_check_interval_ms=30_000,
        )  # fmt: skip
        config = profile(name, base)
        with StreamsFleet(config) as fleet:
            fleet.produce(RECORDS, keys=RECORDS)
            started = time.monotonic()
            for n in ("i1", "i2", "i3"):
                fleet.start(n)
            wait_until(lambda: processed_once(fleet) and fleet.changelog_records() >= RECORDS, 300, "counting")
            settle_s = time.monotonic() - started
            procs = {i.name: psutil.Process(i.popen.pid) for i in fleet.live()}
            startup_cpu = {n: _cpu_s(p) for n, p in procs.items()}
            console.log(f"[{name}] settled in {settle_s:.0f} s; idle for {idle_s:.0f} s")
            idle_rss, idle_cpu = _sample(procs, idle_s)
            pss = {n: p.memory_full_info().pss for n, p in procs.items()}
            console.log(f"[{name}] restoring: i3 restarts with an empty state directory")
            fleet.kill("i3")
            shutil.rmtree(fleet.state_dir("i3"))
            procs["i3"] = psutil.Process(fleet.start("i3").popen.pid)
            restore_rss, restore_cpu = _sample(procs, restore_s)
            return {
                "bench": "streams_footprint",
                "profile": name,
                "command": " ".join(fleet._java()[1:-2]),
                "settle_s": round(settle_s, 1),
                "startup_cpu_s": round(statistics.mean(startup_cpu.values()), 1),
                "idle_rss_mb": round(statistics.mean(idle_rss.values()) / MB),
                "idle_pss_mb": round(statistics.mean(pss.values()) / MB),
                "idle_cpu_pct": round(statistics.mean(idle_cpu.values()), 1),
                "restore_rss_peak_mb": round(max(restore_rss.values()) / MB),
                "restore_cpu_pct": round(statistics.mean(restore_cpu.values()), 1),
                "load_1m": round(os.getloadavg()[0], 2),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", default="default,light")
    parser.add_argument("--idle-s", type=float, default=30)
    parser.add_argument("--restore-s", type=float, default=40)
    args = parser.parse_args()
    console = Console(stderr=True)
    rows = [run(p, args.idle_s, args.restore_s, console) for p in args.profiles.split(",")]
    for row in rows:
        print(json.dumps(row), flush=True)
    table = Table(title="one reference-app JVM (mean of 3; restore: peak RSS of any, mean CPU)")
    keys = [k for k in rows[0] if k not in ("bench", "command")]
    for k in keys:
        table.add_column(k, justify="left" if k == "profile" else "right")
    for row in rows:
        table.add_row(*(str(row[k]) for k in keys))
    console.print(table)


if __name__ == "__main__":
    main()
