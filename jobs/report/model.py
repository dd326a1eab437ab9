"""The report's view model: frozen records the lake is read into and the templates are rendered from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from assignor.cost import PlanCost
from jobs.pipeline.report_only import STREAMS_PROTOCOL_REASON
from jobs.pipeline.status import PlanStatus
from jobs.report.numbers import count, duration, plural


class Assignor(StrEnum):
    """Who decides the assignment: our plan, or a baseline of ``plan_baselines.assignor``."""

    PLAN = "plan"
    KIP441 = "kip441"
    STREAMS_BROKER = "streams_broker"

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def short(self) -> str:
        """The label for a table heading."""
        return _SHORT[self]


_LABELS = {
    Assignor.PLAN: "this plan",
    Assignor.KIP441: "KIP-441 (Kafka Streams alone)",
    Assignor.STREAMS_BROKER: "broker-side assignment (KIP-1071)",
}
_SHORT = {Assignor.PLAN: "this plan", Assignor.KIP441: "KIP-441", Assignor.STREAMS_BROKER: "broker-side"}
BASELINES = (Assignor.KIP441, Assignor.STREAMS_BROKER)


@dataclass(frozen=True)
class Assumptions:
    """The KIP-441 settings and the restore rate the plan and its estimate were computed with."""

    acceptable_recovery_lag: int | None
    max_warmup_replicas: int | None
    num_standby_replicas: int | None
    probing_rebalance_interval_ms: int | None
    restore_rate: float | None  # offsets per second per restoring replica
    restore_rate_source: str | None  # measured, configured or default

    @property
    def settings_text(self) -> str:
        """``acceptable lag 10,000 offsets, 1 standby, 2 warmups at a time, probing every 10 min``."""
        return (
            f"acceptable lag {count(self.acceptable_recovery_lag)} offsets, {count(self.num_standby_replicas)} "
            f"standby, {count(self.max_warmup_replicas)} warmups at a time, probing every "
            f"{duration((self.probing_rebalance_interval_ms or 0) / 1000)}"
        )

    @property
    def rate_text(self) -> str:
        """``5,000 offsets/s (measured)``."""
        return f"{count(self.restore_rate)} offsets/s ({self.restore_rate_source or 'default'})"


@dataclass(frozen=True)
class GroupRisk:
    """One group's risk figures: how complete its reports are and what the plan asks of it beyond moves."""

    members_reporting: int  # instances whose fresh report the plan was made from
    members_in_group: int | None  # instances the broker lists in the group (None: not described)
    stale_reports: int  # instances whose last report was too old to plan from
    idle_instances: tuple[str, ...]  # reporting instances that hold no task (joined, or just restarted)
    unsafe_moves: int | None  # actives placed at the first rebalance on an instance not caught up on them
    largest_restore: int | None  # the most offsets one placed replica must restore (the longest single catch-up)
    assumptions: Assumptions | None = None

    @property
    def complete(self) -> bool:
        """Whether every instance the broker lists reported fresh (unknown membership counts as complete)."""
        return not self.stale_reports and (
            self.members_in_group is None or self.members_reporting >= self.members_in_group
        )


@dataclass(frozen=True)
class GroupRow:
    """One group's plan in the snapshot, as the table of groups shows it."""

    plan_id: str
    group_id: str
    status: str
    reason: str | None
    plan: PlanCost | None  # None for a plan without one (REJECTED)
    baselines: Mapping[Assignor, PlanCost]  # only the baselines computed for this plan
    skew_before: float | None
    skew_after: float | None
    checks_passed: int
    checks_total: int
    draining: tuple[str, ...] = ()  # instances the plan drains (planned scale-in)
    report_only: str | None = None  # why no plan can be sent to this group (jobs/pipeline/report_only.py)
    source_age_ms: int | None = None  # age of the oldest report planned from (a lower bound for group metadata)
    missing_offset_sums: int = 0  # held replicas without offset sums: restore_offsets is a lower bound
    settings_changes: str | None = None  # what the plan's KIP-441 settings change versus the group's own
    steered_streams: bool = False  # a streams-protocol group the brokers' assignor honors plans for
    risk: GroupRisk | None = None  # what could go wrong and what the estimate assumes (None: not read)
    published_at: int | None = None  # epoch ms
    realized_at: int | None = None  # epoch ms: when observe first saw the group run the target (an upper bound)
    snapshot_generation: int | None = None  # the group's generation in the snapshot's own reports (classic protocol)
    realized_generation: int | None = None  # ... in the reports of the observe run that saw the target
    restore_lower_bound: int | None = None  # what any assignment with the group's standbys must restore (None: unknown)
    restored_offsets: int | None = None  # observed: restored between publish and realization by the members reporting
    restored_reporting: int | None = None  # members that reported their restored offsets
    restored_members: int | None = None  # members in the group at realization

    @property
    def restore_vs_bound(self) -> float | None:
        """The plan's restore over its lower bound (1.0: nothing to gain); None when either is unknown, the restore
        is itself a lower bound (missing offset sums), or the bound is 0 while the plan restores something."""
        if self.plan is None or self.restore_lower_bound is None or self.missing_offset_sums:
            return None
        if self.restore_lower_bound == 0:
            return 1.0 if self.plan.restore_offsets == 0 else None
        return self.plan.restore_offsets / self.restore_lower_bound

    @property
    def bound_figure(self) -> str:
        """``1.08×``; ``above 0`` when the bound is 0 and the plan restores; ``-`` when unknown."""
        ratio = self.restore_vs_bound
        if ratio is not None:
            return f"{ratio:.2f}×"
        if self.plan is not None and self.restore_lower_bound == 0 and not self.missing_offset_sums:
            return "above 0"
        return count(None)

    @property
    def took_at_most_s(self) -> float | None:
        """Publish to the observe run that saw the target: the change took at most this long (None: not realized)."""
        if self.realized_at is None or self.published_at is None or self.realized_at < self.published_at:
            return None
        return (self.realized_at - self.published_at) / 1000

    @property
    def rebalances_at_most(self) -> int | None:
        """Generations the group went through from the snapshot to the observe run that saw the target: the plan's
        rebalances plus any other in that time (None: a generation was not reported)."""
        before, after = self.snapshot_generation, self.realized_generation
        if before is None or after is None or after < before:
            return None
        return after - before

    @property
    def restored_text(self) -> str:
        """What the group restored while the plan was carried out, with how many instances said so; "not observed"
        when none did (members without the restored-offsets listener, a plan not realized)."""
        if self.restored_offsets is None or not self.restored_reporting or self.restored_members is None:
            return "not observed"
        figure = plural(self.restored_offsets, "offset")
        if self.restored_reporting < self.restored_members:
            return f"at least {figure} ({self.restored_reporting} of {self.restored_members} instances reported)"
        return f"{figure} (all {plural(self.restored_members, 'instance')} reported)"

    def figure(self, metric: str) -> int | float | None:
        """One PlanCost field of the plan (``metric``: its name); None for a plan without a cost."""
        return None if self.plan is None else getattr(self.plan, metric)

    @property
    def restore_figure(self) -> str:
        """The plan's offsets to restore, ``≥ n`` when replicas without offset sums are not counted in it."""
        if self.plan is None:
            return count(None)
        figure = count(self.plan.restore_offsets)
        return f"≥ {figure}" if self.missing_offset_sums else figure

    @property
    def source_note(self) -> str:
        """For a report-only group: how old its metadata is and what it lacks ("" otherwise)."""
        age = "of unknown age" if self.source_age_ms is None else f"at least {duration(self.source_age_ms / 1000)} old"
        if self.steered_streams:
            return (
                f"streams protocol (KIP-1071): planned from the broker's description {age}; published through the "
                "broker-side assignor (streams.assignor.name)"
            )
        if not self.report_only:
            return ""
        source = "the broker's description" if self.report_only == STREAMS_PROTOCOL_REASON else "group metadata"
        note = f"report-only: planned from {source} {age}"
        if self.status == PlanStatus.VALIDATED:
            note += "; approving it HOLDs it: the group cannot honor a plan, so nothing is published"
        if self.missing_offset_sums:
            replicas = plural(self.missing_offset_sums, "held replica")
            note += f"; {replicas} without offset sums, not counted: the restore figure is a lower bound"
        return note

    @property
    def changes(self) -> bool:
        """Whether running the plan changes what the group runs: an active moves, a task warms up, or a KIP-441
        setting differs from the group's own (the plan is honored with its own). The one test of "this plan
        changes something" (the decision's kind, the report's filter). Offsets to restore alone are not a change:
        they include what replicas the group already runs still owe."""
        p = self.plan
        return bool(self.settings_changes) or (p is not None and bool(p.moves or p.warmups))

    @property
    def settings_note(self) -> str:
        """The visible flag of a plan whose settings differ from the group's own ("" when none)."""
        return f"settings change: {self.settings_changes}" if self.settings_changes else ""

    @property
    def drain_note(self) -> str:
        """What the plan means for the instances it drains ("" when none): safe to stop once the live group runs the
        target, which gives them nothing (REALIZED, or NOOP: it ran it already)."""
        if not self.draining:
            return ""
        names = ", ".join(self.draining)
        if self.status in (PlanStatus.REALIZED, PlanStatus.NOOP):
            return f"drains {names}: {names} {'is' if len(self.draining) == 1 else 'are'} safe to stop"
        if self.status == PlanStatus.EXPIRED:  # e.g. a drained instance left first: nobody saw the drain complete
            return f"drains {names}: the drain was not realized, so not known to be safe to stop; plan it again"
        return f"drains {names}: stop {'it' if len(self.draining) == 1 else 'them'} once the plan is REALIZED"

    @property
    def validation(self) -> str:
        if not self.checks_total:
            return "not validated"
        failed = self.checks_total - self.checks_passed
        return "all passed" if not failed else f"{failed} of {self.checks_total} failed"

    @property
    def anchor(self) -> str:
        """The id of the group's detail in the page (group ids may hold any character)."""
        return "group-" + "".join(c if c.isalnum() or c in "-_" else f"~{ord(c):x}" for c in self.group_id)


@dataclass(frozen=True)
class Held:
    """Tasks one instance holds, by role."""

    active: frozenset[str] = frozenset()
    standby: frozenset[str] = frozenset()
    warmup: frozenset[str] = frozenset()


@dataclass(frozen=True)
class InstancePlacement:
    """One instance now (from its report) and at the plan's target."""

    process_id: str
    before: Held
    after: Held
    name: str | None = None  # host or client id from its report; the process id is shown on hover

    @property
    def label(self) -> str:
        return self.name or self.process_id

    @property
    def gains(self) -> tuple[str, ...]:
        return tuple(sorted(self.after.active - self.before.active))

    @property
    def loses(self) -> tuple[str, ...]:
        return tuple(sorted(self.before.active - self.after.active))


@dataclass(frozen=True)
class StepRow:
    """One step of the schedule: what the group holds after that probing rebalance."""

    step: int
    starts_after_s: float  # from the first rebalance, one probing interval per step
    actives: int
    standbys: int
    warmups: int
    new_warmups: int
    warmup_restore_offsets: int | None  # the new warmups' lag; None when the lags are unknown


@dataclass(frozen=True)
class FailedExpectation:
    """A validation expectation this plan broke."""

    suite: str
    expectation: str
    unexpected_count: int


@dataclass(frozen=True)
class PlanVersion:
    """One of the group's plans over time (any snapshot)."""

    snapshot_id: str
    plan_id: str
    status: str
    moves: int | None
    restore_offsets: int | None
    created_at: int
    approved_by: str | None
    reason: str | None


@dataclass(frozen=True)
class GroupDetail:
    """Everything the page shows about one group beyond its table row."""

    row: GroupRow
    instances: tuple[InstancePlacement, ...]
    steps: tuple[StepRow, ...]
    failed: tuple[FailedExpectation, ...]
    history: tuple[PlanVersion, ...]


@dataclass(frozen=True)
class Aggregate:
    """One metric over a set of groups (null values left out; ``groups`` counts the others)."""

    groups: int
    total: float
    median: float
    p90: float
    maximum: float


@dataclass(frozen=True)
class BaselineComparison:
    """A baseline's aggregate beside the plan's, over the same groups (those the baseline was computed for)."""

    assignor: Assignor
    groups: int  # groups that have this baseline
    plan: Aggregate | None
    baseline: Aggregate | None


@dataclass(frozen=True)
class MetricComparison:
    """One metric: the plans over every group, and each baseline beside the plans on the same groups."""

    metric: str  # a PlanCost field
    label: str
    headline: str  # "total" or "maximum": the figure a person reads first
    plan: Aggregate | None
    baselines: tuple[BaselineComparison, ...]


@dataclass(frozen=True)
class Fleet:
    """The first screen: how many groups in which status, what tonight's plans cost, and against what."""

    snapshot_id: str
    groups: int
    by_status: tuple[tuple[str, int], ...]
    tonight: int  # plans that passed validation (validated, approved, published or realized)
    tonight_cost: Mapping[str, Aggregate | None]
    comparisons: tuple[MetricComparison, ...]
    coverage: Mapping[Assignor, int]
    top: tuple[GroupRow, ...]  # the groups that matter most: most restore, then longest, then most moves
    # (plans' restore, their lower bounds) summed over the groups whose both figures are known (restore_vs_bound)
    restore_and_bound: tuple[int, int] | None = None

    @property
    def restore_vs_bound(self) -> float | None:
        """Fleet-wide restore over its lower bound; None when no group has both or every bound is 0."""
        if self.restore_and_bound is None or self.restore_and_bound[1] == 0:
            return None
        return self.restore_and_bound[0] / self.restore_and_bound[1]


@dataclass(frozen=True)
class ReportingGap:
    """A group that should have reported this snapshot and did not (code and reason as membership_checks has them)."""

    group_id: str
    code: str
    reason: str


@dataclass(frozen=True)
class Report:
    """A snapshot's whole report."""

    snapshot_id: str
    generated_at: int  # epoch ms: statuses are as of this time
    fleet: Fleet
    rows: tuple[GroupRow, ...]
    details: tuple[GroupDetail, ...] = field(default=())
    reporting_gaps: tuple[ReportingGap, ...] = field(default=())
