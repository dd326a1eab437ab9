"""The rebalance-planner console script, run as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(sys.executable).parent / "rebalance-planner"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="160")
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=120, env=env, check=False)


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "simulate" in result.stdout


def test_simulate_prints_the_per_round_table_of_kip441_scaling_out() -> None:
    result = run("simulate", "kip441-scaling-out", "--assignments")
    assert result.returncode == 0, result.stderr
    assert "kip441-scaling-out: rounds" in result.stdout
    assert "add:I3" in result.stdout
    assert "converged after 2 rebalances" in result.stdout


def test_simulate_json_lines_per_round() -> None:
    result = run("simulate", "scale-out-3-to-4", "--json")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["round"] for r in rows] == list(range(6))
    assert sum(r["moves"] for r in rows) == 9
    assert rows[-1]["probing_rebalance_needed"] is False


def test_simulate_a_scenario_file_with_a_restore_rate(tmp_path: Path) -> None:
    scenario = {
        "name": "file",
        "subtopologies": [{"id": 0, "partitions": 4}],
        "default_end_offset_sum": 100_000,
        "configs": {"probing_rebalance_interval_ms": 10_000},
        "clients": [{"process_id": "a", "active": ["0_0", "0_1", "0_2", "0_3"]}],
        "events": [{"at_round": 0, "kind": "add", "process_id": "b"}],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    result = run("simulate", "--file", str(path), "--restore-rate", "5000", "--json")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    # b restores 50,000 offsets per 10 s interval: two intervals per 100,000-offset task, two warmups at once.
    assert rows[0]["restored_offsets"] == 50_000
    assert rows[-1]["probing_rebalance_needed"] is False


def test_max_rounds_too_small_exits_1() -> None:
    result = run("simulate", "scale-out-3-to-4", "--max-rounds", "2")
    assert result.returncode == 1
    assert "NOT converged" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "cannot read scenario file"),
        (json.dumps({"clients": []}), "at (top level)"),
        (json.dumps({"tasks": {"stateful": ["0-1"]}, "clients": [{"process_id": "a"}]}), "tasks/stateful/0"),
        (json.dumps({"tasks": {}, "clients": [{"process_id": "a", "capacity": 0}]}), "clients/0/capacity"),
        (json.dumps({"tasks": {}, "clients": [{"process_id": "a"}, {"process_id": "a"}]}), "duplicate process_id"),
    ],
)
def test_bad_scenario_file_exits_2_with_one_line_reason(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = run("simulate", "--file", str(path))
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_usage_exits_2() -> None:
    assert run("simulate", "--restore-rate", "fast").returncode == 2
    assert run("frobnicate").returncode == 2
    assert run("simulate", "no-such-scenario").returncode == 2


def test_simulate_with_the_planner_needs_fewer_moves_and_rounds_than_kip441() -> None:
    rows = {}
    for assignor in ("kip441", "planner"):
        result = run("simulate", "scale-out-3-to-4", "--assignor", assignor, "--json")
        assert result.returncode == 0, result.stderr
        rows[assignor] = [json.loads(line) for line in result.stdout.splitlines()]
    assert sum(r["moves"] for r in rows["planner"]) == 3 < sum(r["moves"] for r in rows["kip441"])
    assert len(rows["planner"]) == 3 < len(rows["kip441"])
