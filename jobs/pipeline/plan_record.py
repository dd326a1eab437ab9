"""The plan record: one planned group as a PLANNED_SCHEMA row (plans' planner columns plus its steps), and the one
place a plan's cost becomes table columns and back."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import accumulate, chain
from typing import Any

import numpy as np
import pyarrow as pa

from assignor import AssignmentConfigs, GroupPlan, GroupState, PlanCost, Role, TaskId, plan_group
from assignor.cost import COST_COLUMNS
from jobs.lakehouse.tables import table_schema
from jobs.pipeline.group_input import PlanningRows, first_value, group_state, groups_of
from jobs.pipeline.rate_source import RateSource
from jobs.pipeline.status import PlanStatus

log = logging.getLogger(__name__)

# One row per planned group, so one call returns one row per group: the plans columns the planner fills (marked
# "written_by": "plan" in the table's schema file), plus every (step, process, task, role) of its steps as an
# array of plan_assignments' own columns, which explode_assignments turns into plan_assignments rows.
PLANNED_COLUMNS = table_schema("plans").written_by("plan")
GROUP_IDS = ("plan_id", "snapshot_id", "group_id")
STEP_COLUMNS = tuple(c for c in table_schema("plan_assignments").column_names if c not in GROUP_IDS)
PLANNED_SCHEMA = (
    table_schema("plans").select_ddl(PLANNED_COLUMNS)
    + f", assignments array<{table_schema('plan_assignments').struct_ddl(STEP_COLUMNS)}>"
)


def plan_id_of(snapshot_id: str, group_id: str) -> str:
    """A plan's id: one plan per group per snapshot, so re-planning a snapshot finds the same ids."""
    return f"{snapshot_id}/{group_id}"


def cost_columns(cost: PlanCost) -> dict[str, int | float]:
    """A cost as the plans and plan_baselines columns of the same names."""
    return asdict(cost)


def cost_of(row: Mapping[str, Any]) -> PlanCost | None:
    """The cost a plans or plan_baselines row holds; None for a row without one (a REJECTED plan)."""
    if any(row[c] is None for c in COST_COLUMNS):
        return None
    return PlanCost(**{c: row[c] for c in COST_COLUMNS})


def is_noop(plan: GroupPlan, group: GroupState) -> bool:
    """Balanced already: the target is what the group runs now and nothing needs a probing rebalance."""
    if len(plan.steps) != 1 or plan.steps[0].probing_rebalance_needed:
        return False
    return all(
        plan.target.clients[c.process_id].active == c.previous_active
        and plan.target.clients[c.process_id].standby == c.previous_standby
        for c in group.clients
    )


@dataclass(frozen=True)
class StepEntries:
    """Every (step, process, task, role) of a plan's steps as runs: run i is the next ``lengths[i]`` of ``tasks``,
    held by process ``processes[i]`` in role ``ROLES[roles[i]]`` at step ``steps[i]`` (steps numbered from 1)."""

    steps: list[int] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    roles: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)

    def columns(self) -> dict[str, list[Any]]:
        """The entries column by column (STEP_COLUMNS), one per (step, process, task, role)."""
        return {
            "step": _expand(self.lengths, self.steps),
            "process_id": _expand(self.lengths, self.processes),
            "task_id": list(self.tasks),
            "role": _expand(self.lengths, [ROLES[r] for r in self.roles]),
        }


def _expand(lengths: Sequence[int], values: Sequence[Any]) -> list[Any]:
    return [v for v, n in zip(values, lengths, strict=True) for _ in range(n)]


ROLES = (Role.ACTIVE.name, Role.STANDBY.name, Role.WARMUP.name)


class _TaskNames(dict[TaskId, str]):
    """TaskId -> its name, shared by every plan a process converts (a fleet's plans name the same few dozen tasks
    millions of times); bounded. A dict rather than functools.lru_cache like group_input.task_id: a hit costs
    a third as much, and names are looked up once per plan_assignments row."""

    def __missing__(self, task: TaskId) -> str:
        if len(self) >= 65_536:
            self.clear()
        name = self[task] = str(task)
        return name


_task_names = _TaskNames()


def step_assignments(plan: GroupPlan) -> StepEntries:
    """Every (step, process, task, role) of the plan's steps as runs, each process's tasks ordered within a role."""
    # Runs, not an entry at a time: a group has hundreds of entries, and one run per (step, process, role) keeps
    # the per-entry work in C (sorting, naming, and in planned_arrow repeating a run's step, process and role).
    entries = StepEntries()
    name = _task_names.__getitem__
    for number, step in enumerate(plan.steps, start=1):
        for pid in sorted(step.clients):
            held = step.clients[pid]
            for role, tasks in enumerate((held.active, held.standby, held.warmup)):
                if tasks:
                    entries.steps.append(number)
                    entries.processes.append(pid)
                    entries.roles.append(role)
                    entries.lengths.append(len(tasks))
                    entries.tasks.extend(map(name, sorted(tasks)))
    return entries


def plan_record(
    rows: PlanningRows,
    configs: AssignmentConfigs,
    restore_rate: float | None,
    created_at: int,
    drains: Mapping[str, frozenset[str]] | None = None,
    rate_source: RateSource | None = None,
) -> dict[str, Any]:
    """One group's PLANNED_SCHEMA row; a group whose input the assignor refuses (or an impossible drain, see
    ``drains``: group_id -> processes to drain) gets a REJECTED row saying why. ``rate_source`` says where
    ``restore_rate`` came from (default: the settings when given, else the assignor's default)."""
    out = unplanned_record(rows, created_at, drains)
    snapshot_id, group_id = out["snapshot_id"], out["group_id"]
    if rate_source is None:
        rate_source = RateSource.DEFAULT if restore_rate is None else RateSource.SETTINGS
    try:
        group = group_state(rows)
        plan = plan_group(group, configs, restore_rate=restore_rate, draining=frozenset(out["draining"] or ()))
    except ValueError as err:  # InvalidGroupState and friends: this group's input, not the run, is bad
        return rejected(out, f"planning failed: {err}")
    except Exception as err:  # a planner fault on one group must not cost the rest of the fleet its plans
        log.exception("planning %s/%s failed", snapshot_id, group_id)
        return rejected(out, f"planning failed: internal error {type(err).__name__}: {err}")
    out.update(cost_columns(plan.cost))
    out.update(
        status=PlanStatus.NOOP if is_noop(plan, group) else PlanStatus.PENDING,
        max_load_skew_before=plan.max_load_skew_before,
        max_load_skew_after=plan.max_load_skew_after,
        restore_lower_bound=plan.restore_lower_bound,
        restore_rate=float(plan.restore_rate),
        restore_rate_source=str(rate_source),
        move_order=[str(t) for t in plan.move_order] or None,
        reason=None,
        assignments=step_assignments(plan),
    )
    return out


def unplanned_record(
    rows: PlanningRows, created_at: int, drains: Mapping[str, frozenset[str]] | None
) -> dict[str, Any]:
    """A group's PLANNED_SCHEMA row before planning: its ids, every other column null (``drains`` as in
    plan_record)."""
    snapshot_id, group_id = first_value(rows, "snapshot_id"), first_value(rows, "group_id")
    # Every column present, null where a rejected group has no value: the engine checks the UDF's column names.
    out: dict[str, Any] = dict.fromkeys(PLANNED_COLUMNS)
    out |= {
        "plan_id": plan_id_of(snapshot_id, group_id),
        "snapshot_id": snapshot_id,
        "group_id": group_id,
        "created_at": created_at,
        "draining": sorted((drains or {}).get(group_id, frozenset())) or None,
    }
    return out


def rejected(out: dict[str, Any], reason: str) -> dict[str, Any]:
    """``out`` (an unplanned_record) as a REJECTED row saying why, with no steps."""
    out.update(status=PlanStatus.REJECTED, reason=reason, assignments=StepEntries(), move_order=None)
    return out


@dataclass(frozen=True)
class PlanCall:
    """What every planner call of a run plans with, beside its rows: ``rates`` is group_id -> restore rate and its
    source for the call's groups; ``schema`` the Arrow form of PLANNED_SCHEMA; ``drains`` as in plan_record;
    ``group_configs`` each group's own settings (group_settings.py), ``configs`` for a group it lacks."""

    configs: AssignmentConfigs
    rates: Mapping[str, tuple[float, RateSource]]
    created_at: int
    schema: pa.Schema
    drains: Mapping[str, frozenset[str]] | None = None
    group_configs: Mapping[str, AssignmentConfigs] = field(default_factory=dict)


def plan_table(rows: pa.Table, call: PlanCall) -> pa.Table:
    """plan_record on Arrow: several groups' rows in, one PLANNED_SCHEMA row per group out, each at its rate.
    Both conversions happen here, in whichever process plans: a group's row holds hundreds of nested assignment
    structs, and converting them where the engine calls the UDF (one GIL for every engine thread under Sail) was
    the stage's bottleneck."""
    records = []
    for group in groups_of(rows):
        group_id = first_value(group, "group_id")
        rate, source = call.rates[group_id]
        configs = call.group_configs.get(group_id, call.configs)
        records.append(plan_record(group, configs, rate, call.created_at, call.drains, source))
    return planned_arrow(records, call.schema)


def died_alone(rows: pa.Table, call: PlanCall) -> pa.Table:
    """The row of a group whose planning killed its worker process while it was planned alone: REJECTED, saying so."""
    record = unplanned_record(next(groups_of(rows)), call.created_at, call.drains)
    log.error("planning %s/%s killed its worker process", record["snapshot_id"], record["group_id"])
    reason = "planning failed: the worker process planning this group alone died (out of memory, or a crash)"
    return planned_arrow([rejected(record, reason)], call.schema)


def planned_arrow(records: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """plan_record rows as an Arrow table of ``schema``, built column by column."""
    arrays = [pa.array([r[name] for r in records], type=schema.field(name).type) for name in PLANNED_COLUMNS]
    runs: list[StepEntries] = [r["assignments"] for r in records]
    lengths = np.fromiter(chain.from_iterable(r.lengths for r in runs), dtype=np.int64)
    offsets = pa.array(list(accumulate((len(r.tasks) for r in runs), initial=0)), type=pa.int32())
    entry: pa.StructType = schema.field("assignments").type.value_type

    def repeated(values: Iterable[Any], dictionary: pa.Array | None = None) -> pa.Array:
        # A run's step, process and role repeated for each of its tasks, in numpy; strings through a dictionary.
        codes = pa.array(np.repeat(np.fromiter(values, dtype=np.int32), lengths))
        return codes if dictionary is None else pa.DictionaryArray.from_arrays(codes, dictionary).cast(pa.string())

    processes: dict[str, int] = {}
    process_codes = [processes.setdefault(p, len(processes)) for r in runs for p in r.processes]
    columns = {
        "step": repeated(chain.from_iterable(r.steps for r in runs)),
        "process_id": repeated(process_codes, pa.array(list(processes), type=pa.string())),
        "task_id": pa.array(list(chain.from_iterable(r.tasks for r in runs)), type=pa.string()),
        "role": repeated(chain.from_iterable(r.roles for r in runs), pa.array(ROLES, type=pa.string())),
    }
    values = pa.StructArray.from_arrays(
        [columns[c].cast(entry.field(c).type) for c in STEP_COLUMNS], fields=[entry.field(c) for c in STEP_COLUMNS]
    )
    arrays.append(pa.ListArray.from_arrays(offsets, values, type=schema.field("assignments").type))
    return pa.Table.from_arrays(arrays, schema=schema)
