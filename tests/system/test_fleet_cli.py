"""`rebalance-planner fleet` and `instance` as real processes: scheduled add and kill, status tables, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from assignor.runtime.events import read_events
from jobs.local.broker import EmbeddedBroker
from tests.support.signing import VERIFY_KEYS

CLI = Path(sys.executable).parent / "rebalance-planner"


def test_fleet_runs_groups_and_applies_its_schedule(broker: EmbeddedBroker, tmp_path: Path) -> None:
    env = dict(
        os.environ, COLUMNS="200", RBP_KAFKA_BOOTSTRAP=broker.bootstrap, RBP_PLAN_VERIFY_KEYS=VERIFY_KEYS.render()
    )
    args = [
        str(CLI),
        "fleet",
        "--groups",
        "1",
        "--instances",
        "2",
        "--partitions",
        "3",
        "--rate",
        "20",
        "--root",
        str(tmp_path),
        "--status-interval",
        "10",
        "--probing-rebalance-interval-ms",
        "3000",
        "--schedule",
        "5:add:group-1",
        "--schedule",
        "15:kill:group-1/i1",
        "--duration",  # a killed member leaves after its session (6 s); Kafka rebalances at once after that
        "35",
    ]
    result = subprocess.run(
        args, capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "added group-1/i3" in result.stdout
    assert "kill group-1/i1" in result.stdout
    assert "group-1/i3" in result.stdout and "exited" in result.stdout  # the last status table
    killed = read_events(tmp_path / "group-1" / "i1" / "events.jsonl")
    survivors = [read_events(tmp_path / "group-1" / name / "events.jsonl") for name in ("i2", "i3")]
    # Generation by generation: the survivor that stops first leaves the group, so the other may get a last
    # generation of its own holding everything; only generations both were in are compared.
    actives = [{e["generation"]: e["active"] for e in events if e["event"] == "assigned"} for events in survivors]
    last_with_i1 = max(e["generation"] for e in killed if e["event"] == "assigned")
    shared = sorted(set(actives[0]) & set(actives[1]))
    assert shared, actives
    for generation in shared:  # no task is ever active on both at once
        assert not set(actives[0][generation]) & set(actives[1][generation]), (generation, actives)
    # After the kill the two survivors hold all three tasks between them.
    after_kill = [sorted(actives[0][g] + actives[1][g]) for g in shared if g > last_with_i1]
    assert ["0_0", "0_1", "0_2"] in after_kill, (last_with_i1, actives)


@pytest.mark.parametrize(
    ("args", "env", "reason"),
    [
        (["instance", "--group", "g"], {}, "--bootstrap or RBP_KAFKA_BOOTSTRAP"),
        (["fleet", "--schedule", "soon:add:g"], {"RBP_KAFKA_BOOTSTRAP": "127.0.0.1:1"}, "--schedule"),
        (["fleet", "--schedule", "5:explode:g"], {"RBP_KAFKA_BOOTSTRAP": "127.0.0.1:1"}, "add|stop|kill|restart"),
    ],
)
def test_bad_input_exits_2_with_the_reason(args: list[str], env: dict[str, str], reason: str, tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RBP_")}
    where = ["--state-dir", str(tmp_path)] if args[0] == "instance" else ["--root", str(tmp_path)]
    result = subprocess.run(
        [str(CLI), *args, *where], capture_output=True, text=True, timeout=300, env={**clean, **env}, check=False
    )
    assert result.returncode == 2
    assert reason in result.stderr
