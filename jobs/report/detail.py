"""A group's detail from its rows: placement per instance before and after, and the step-by-step schedule."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from jobs.report.model import Held, InstancePlacement, StepRow

Assignment = Mapping[str, Held]  # process id -> what it holds


def held_by_process(rows: Iterable[tuple[str, str, str]]) -> dict[str, Held]:
    """(process_id, task_id, role) rows -> what each process holds."""
    roles: dict[str, dict[str, set[str]]] = {}
    for pid, task, role in rows:
        roles.setdefault(pid, {"ACTIVE": set(), "STANDBY": set(), "WARMUP": set()})[role].add(task)
    return {
        pid: Held(frozenset(r["ACTIVE"]), frozenset(r["STANDBY"]), frozenset(r["WARMUP"])) for pid, r in roles.items()
    }


def placements(
    before: Assignment, target: Assignment, names: Mapping[str, str] | None = None
) -> tuple[InstancePlacement, ...]:
    """Every instance present now or at the target, by process id; ``names``: process id -> host or client id."""
    names = names or {}
    return tuple(
        InstancePlacement(pid, before.get(pid, Held()), target.get(pid, Held()), names.get(pid))
        for pid in sorted(set(before) | set(target), key=lambda p: (names.get(p) or p, p))
    )


def schedule(
    steps: Mapping[int, Assignment], lags: Mapping[tuple[str, str], int] | None, probing_interval_s: float
) -> tuple[StepRow, ...]:
    """One row per step; a warmup is new when its instance did not warm that task up in the step before.
    ``lags``: (process_id, task_id) -> lag in the snapshot; None when unknown."""
    rows = []
    previous: set[tuple[str, str]] = set()
    for i, step in enumerate(sorted(steps)):
        held = steps[step]
        warm = {(pid, t) for pid, h in held.items() for t in h.warmup}
        new = warm - previous
        restore = None if lags is None else sum(lags.get(w, 0) for w in new)
        rows.append(
            StepRow(
                step=step,
                starts_after_s=i * probing_interval_s,
                actives=sum(len(h.active) for h in held.values()),
                standbys=sum(len(h.standby) for h in held.values()),
                warmups=len(warm),
                new_warmups=len(new),
                warmup_restore_offsets=restore,
            )
        )
        previous = warm
    return tuple(rows)
