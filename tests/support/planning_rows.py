"""planning_input rows of one small group for the plan stage's unit tests, without an engine."""

from __future__ import annotations

import pandas as pd


def two_client_rows(end_offset_sum: int, held_offset_sum: int) -> pd.DataFrame:
    """Group g1: clients p1 and p2; p1 runs both stateful tasks (0_0, 0_1) and reports ``held_offset_sum`` for
    each (-2: running); p2 has no state. Each task's changelogs end at ``end_offset_sum``."""
    base = {"snapshot_id": "s1", "group_id": "g1", "capacity": 1, "stateful": None}
    none = {"task_id": None, "end_offset_sum": None, "offset_sum": None, "active_tasks": None, "standby_tasks": None,
            "warmup_tasks": None}  # fmt: skip
    held = {"p1": ["0_0", "0_1"], "p2": []}
    rows = [{**none, **base, "kind": "client", "process_id": p, "active_tasks": held[p], "standby_tasks": [],
             "warmup_tasks": []} for p in ("p1", "p2")]  # fmt: skip
    for task in ("0_0", "0_1"):
        rows.append({**base, **none, "kind": "task", "process_id": None, "task_id": task, "stateful": True,
                     "end_offset_sum": end_offset_sum})  # fmt: skip
        rows.append({**base, **none, "kind": "offset", "process_id": "p1", "task_id": task,
                     "offset_sum": held_offset_sum})  # fmt: skip
    return pd.DataFrame(rows)
