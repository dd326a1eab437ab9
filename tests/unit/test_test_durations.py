"""The suite's own scheduling aids: per-module seconds from a JUnit report, the predicted wall time of a parallel run,
and the weights a module not yet measured gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.durations import makespan, module_seconds
from tests.support.xdist_groups import TIER_SECONDS, expected_seconds

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.system.test_dag_run" name="test_a" time="100.5"/>
<testcase classname="tests.system.test_dag_run" name="test_b" time="20"/>
<testcase classname="tests.unit.test_model.TestClass" name="test_c" time="0.25"/>
<testcase classname="tests.integration.test_broker" name="test_d[x.y]" time="3"/>
</testsuite></testsuites>"""


def test_seconds_are_summed_per_module_with_classes_folded_into_their_module(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(JUNIT, encoding="utf-8")
    assert module_seconds(report) == {
        "tests/system/test_dag_run.py": 120.5,
        "tests/unit/test_model.py": 0.25,
        "tests/integration/test_broker.py": 3.0,
    }


@pytest.mark.parametrize(("time", "problem"), [("soon", "non-numeric time 'soon'"), ("-1", "outside 0..86400")])
def test_a_broken_time_is_refused_naming_the_test_case(tmp_path: Path, time: str, problem: str) -> None:
    report = tmp_path / "run.xml"
    report.write_text(JUNIT.replace('time="20"', f'time="{time}"'), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"'test_b' has .*{problem}"):
        module_seconds(report)


def test_longest_first_list_scheduling_puts_the_longest_apart_and_fills_with_the_rest() -> None:
    wall, loads = makespan([50, 40, 30, 20, 10], 2)
    assert (wall, sorted(loads)) == (80, [70, 80])  # 50+20+10 | 40+30
    assert makespan([10, 10], 1) == (20, [20])


def test_a_module_not_measured_weighs_as_its_tier() -> None:
    measured = {"tests/system/test_dag_run.py": 300.0}
    assert expected_seconds("tests/system/test_dag_run.py", measured) == 300.0
    assert expected_seconds("tests/system/test_new.py", measured) == TIER_SECONDS["system"]
    assert expected_seconds("tests/unit/test_new.py", measured) == TIER_SECONDS["unit"]
