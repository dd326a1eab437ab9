"""What a streams-protocol group's members hold, as the broker describes the group (the Java reader's output)."""

from __future__ import annotations

import json
import time

from jobs.pipeline.broker_streams import parse_reader_output
from jobs.pipeline.streams_reader import read_streams_groups_lines

Holdings = dict[str, tuple[set[str], set[str]]]


def broker_holdings(bootstrap: str, group_id: str) -> Holdings:
    """Per process id, its (active, standby) tasks; empty while the broker does not describe the group."""
    read = parse_reader_output(read_streams_groups_lines(bootstrap, {}, 10.0), int(time.time() * 1000))
    group = next((g for g in read.groups if g.group_id == group_id), None)
    out: Holdings = {}
    for _, value in group.reports if group is not None else ():
        r = json.loads(value)
        out[r["process_id"]] = (set(r["active_tasks"]), set(r["standby_tasks"]))
    return out
