"""What a group restored while a plan was carried out: the sum of its instances' restores that began between the
plan's publish and the observe run that saw it realized, and how complete that is (pure Python).

Each instance reports its latest restore per task (assignor/protocol/restored_offsets.py): in its own state report
(the Python runtime) or in a restored-offsets report of its own (a Kafka Streams member, through the plugin's
restore listener). Of the two, the newer record counts. A restore that began before publish is not the plan's; a
task restored twice on one instance within the window counts only its latest restore, so the sum is a lower bound
in that case (docs/plan-lifecycle.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from assignor.protocol.restored_offsets import RestoredOffsetsReport, TaskRestore
from assignor.protocol.state_report import StateReport
from assignor.task import TaskId

Restores = Mapping[TaskId, TaskRestore]
# The plans columns observe writes from a RestoredDuring (and the report reads), in that order.
RESTORED_COLUMNS = ("restored_offsets", "restored_reporting", "restored_members")


@dataclass(frozen=True)
class RestoredDuring:
    """Offsets a group's instances restored in a plan's window, and how many of its members said so."""

    offsets: int  # summed over the members that reported restored offsets
    reporting: int  # members whose restored offsets are known
    members: int  # members in the group (its fresh state reports)


def newest_restores(
    reports: Iterable[StateReport], restored: Iterable[RestoredOffsetsReport]
) -> dict[tuple[str, str], tuple[int, Restores]]:
    """(group_id, process_id) -> (reported_at, restores) of the newer record that carries them; a state report
    without the field says nothing (not reported), unlike an empty map (nothing restored)."""
    out: dict[tuple[str, str], tuple[int, Restores]] = {}
    candidates: list[tuple[str, str, int, Restores]] = [
        (r.group_id, r.process_id, r.reported_at, r.restored_offsets) for r in reports if r.restored_offsets is not None
    ]
    candidates += [(r.group_id, r.process_id, r.reported_at, r.restores) for r in restored]
    for group_id, process_id, at, restores in candidates:
        known = out.get((group_id, process_id))
        if known is None or at > known[0]:
            out[(group_id, process_id)] = (at, restores)
    return out


def restored_during(
    members: Iterable[str], restores: Mapping[str, Restores], published_at: int, until: int
) -> RestoredDuring:
    """The offsets restored by the restores of ``members`` (process ids) that began in ``published_at..until``."""
    members = sorted(set(members))
    known = [restores[m] for m in members if m in restores]
    offsets = sum(r.offsets for rs in known for r in rs.values() if published_at <= r.started_at <= until)
    return RestoredDuring(offsets, len(known), len(members))


def groups_restored(
    plans: Mapping[str, tuple[str, int]],
    reports: Iterable[StateReport],
    restored: Iterable[RestoredOffsetsReport],
    until: int,
) -> dict[str, RestoredDuring]:
    """plan_id -> what its group restored; ``plans``: plan_id -> (group_id, published_at); ``reports``: the fresh
    state reports, whose processes are the group's members."""
    reports = list(reports)
    newest = newest_restores(reports, restored)
    members: dict[str, set[str]] = {}
    for r in reports:
        members.setdefault(r.group_id, set()).add(r.process_id)
    out = {}
    for plan_id, (group_id, published_at) in plans.items():
        group = members.get(group_id, set())
        restores = {p: newest[(group_id, p)][1] for p in group if (group_id, p) in newest}
        out[plan_id] = restored_during(group, restores, published_at, until)
    return out
