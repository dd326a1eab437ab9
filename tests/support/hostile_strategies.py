"""Hypothesis strategies for hostile input: numbers as text (thousands of digits, beyond int32/int64, signs, other
scripts' digits), task and subtopology ids built from them, and ids of every length; used as keys as well as
values, since keys are parsed too."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.support.pipeline_kafka import report, stateful_topology

_EDGES = [0, 1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, -1, -(2**31), -(2**63) - 1]


def number_texts() -> st.SearchStrategy[str]:
    """Decimal-looking text a hostile writer might send for a number."""
    digits = st.integers(1, 6_000).map(lambda n: "9" * n)
    return st.one_of(
        st.sampled_from(_EDGES).map(str),
        st.integers().map(str),
        digits,
        st.sampled_from(["", "-0", "+1", "01", "1_000", " 1", "1 ", "1e3", "0x1", "٣", "０", "¹", "1\n", "NaN"]),
        st.text(st.sampled_from("0123456789-+_ e٣"), max_size=30),
    )


def task_id_texts() -> st.SearchStrategy[str]:
    """Task-id-like text: two number texts around an underscore, or anything at all."""
    return st.one_of(
        st.tuples(number_texts(), number_texts()).map(lambda p: f"{p[0]}_{p[1]}"),
        st.text(max_size=40),
    )


def ids() -> st.SearchStrategy[str]:
    """Group and process ids: empty, ordinary, at and beyond the 249-character bound, odd characters."""
    return st.one_of(
        st.text(min_size=0, max_size=20),
        st.integers(248, 2_000).map(lambda n: "p" * n),
        st.sampled_from(["/", "g/p", "\x00", "\ud800", "é" * 249]),
    )


@st.composite
def reports_with_hostile_keys(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A state report (key, value) whose task ids, subtopology keys and ids are drawn from the hostile ones."""
    group, process = draw(ids()), draw(ids())
    body: dict[str, Any] = report("g", "p", topology=stateful_topology("g", 1))
    body["group_id"], body["process_id"] = group, process
    sub = body["topology"]["0"]
    body["topology"] = {draw(st.one_of(number_texts(), st.just("0"))): sub for _ in range(draw(st.integers(1, 3)))}
    tasks = st.lists(task_id_texts(), max_size=3)
    body["active_tasks"], body["standby_tasks"] = draw(tasks), draw(tasks)
    body["task_offset_sums"] = {t: draw(st.sampled_from([-3, -2, 0, 5, 2**63 - 1])) for t in draw(tasks)}
    if draw(st.booleans()):
        body["task_lags"] = {t: 0 for t in draw(tasks)}
    key = f"{group}/{process}" if draw(st.booleans()) else draw(st.text(max_size=30))
    value = json.dumps(body).encode("utf-8", "surrogatepass")
    return key.encode("utf-8", "surrogatepass"), value
