"""The decision a person makes, from the snapshot's plan rows: which groups change, which plans only keep the current
assignment against KIP-441's moves, which groups need nothing; each changing group's why and risk, ranked. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from jobs.pipeline.status import PlanStatus
from jobs.report.model import Assignor, GroupRow
from jobs.report.numbers import count, duration, plural

# A report older than this is a risk: the group may have changed since (a member joined, left, caught up).
OLD_REPORT_S = 3600.0
# A single replica restoring more than this many seconds at the plan's restore rate is a long catch-up.
LONG_RESTORE_S = 600.0


class Kind(StrEnum):
    """What approving a group's plan does."""

    CHANGE = "change"  # VALIDATED and GroupRow.changes: moves or warms up tasks, or changes a KIP-441 setting
    KEEP = "keep"  # VALIDATED, changes nothing: keeps the current assignment where KIP-441 alone would move tasks
    NOTHING = "nothing"  # NOOP, or VALIDATED changing nothing where KIP-441 would not move either (or not computed)
    DECIDED = "decided"  # not awaiting a decision: rejected by validation, approved, published, realized...


class Risk(StrEnum):
    """How much could go wrong when the plan runs; ``high`` first in the list."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        return {Risk.HIGH: 0, Risk.MEDIUM: 1, Risk.LOW: 2}[self]


@dataclass(frozen=True)
class Choice:
    """One group as the decision shows it."""

    row: GroupRow
    kind: Kind
    why: str  # one line: why the plan does what it does
    risk: Risk
    risks: tuple[str, ...]  # the figures behind ``risk``, each a short phrase
    kip441_moves: int | None  # what KIP-441 alone would move (None: not computed)

    @property
    def group_id(self) -> str:
        return self.row.group_id

    @property
    def moves(self) -> int:
        return self.row.plan.moves if self.row.plan else 0

    @property
    def warmups(self) -> int:
        return self.row.plan.warmups if self.row.plan else 0

    @property
    def versus_kip441(self) -> str:
        """The plan's moves against KIP-441's, direction spelt out: ``KIP-441: 12 (plan 9 fewer)``."""
        if self.kip441_moves is None:
            return "KIP-441 not computed"
        diff = self.moves - self.kip441_moves
        if diff == 0:
            return f"KIP-441: {count(self.kip441_moves)} (same)"
        word = "fewer" if diff < 0 else "more"
        return f"KIP-441: {count(self.kip441_moves)} (plan {count(abs(diff))} {word})"


@dataclass(frozen=True)
class Scope:
    """A set of offered plans and what approving them (and rejecting the other offered ones) does."""

    groups: int
    moves: int
    warmups: int
    restore_offsets: int
    longest_s: float | None
    kip441_moves: int  # what KIP-441 alone would move in these groups (where computed)
    changing: int  # plans of each kind in the scope
    keeping: int
    unchanged: int
    rejected: int  # offered plans outside the scope: approving the scope rejects them
    keeps_left: int  # keep-plans among the rejected: their groups are left to KIP-441
    kip441_left: int  # what KIP-441 may move in those groups

    @property
    def left_to_kip441(self) -> str:
        """The keep-plans the scope leaves out: ``3 keep-plans not selected: KIP-441 may move 126 tasks there``."""
        if not self.keeps_left:
            return ""
        moves = plural(self.kip441_left, "task")
        return f"{plural(self.keeps_left, 'keep-plan')} not selected: KIP-441 may move {moves} there"

    def approving(self) -> str:
        """The confirmation's first sentence: the counts approved, by kind, and the plans rejected."""
        kinds = [
            plural(n, word)
            for n, word in (
                (self.changing, "changing group"),
                (self.keeping, "keep-plan"),
                (self.unchanged, "no-change plan"),
            )
            if n
        ]
        return (
            f"Approve {plural(self.groups, 'plan')}, {plural(self.moves, 'move')}, {plural(self.warmups, 'warmup')}"
            + (f" ({', '.join(kinds)})" if kinds else "")
            + f"; reject the other {plural(self.rejected, 'plan')}."
        )

    def confirmation(self) -> str:
        """What the confirmation says before the scope is approved (decide.js writes the same words for a ticked
        selection): what is approved, and the KIP-441 moves the keep-plans left out allow."""
        return f"{self.approving()} {self.left_to_kip441}." if self.keeps_left else self.approving()


@dataclass(frozen=True)
class Triage:
    """The first screen: the changing groups ranked, the keep-plans and the groups that need nothing."""

    change: tuple[Choice, ...]  # ranked: highest risk first, then the most different from KIP-441
    keep: tuple[Choice, ...]
    nothing: tuple[Choice, ...]
    decided: tuple[Choice, ...]
    awaiting: tuple[Choice, ...]  # every VALIDATED plan, as offered: the changing ones, the keep-plans, the rest
    offered: Scope  # over ``awaiting``
    changing: Scope  # the change groups only
    differing: Scope  # the change groups and the keep-plans: every plan that differs from what Kafka would do

    @property
    def prevented(self) -> int:
        """KIP-441 moves the keep-plans prevent."""
        return sum(c.kip441_moves or 0 for c in self.keep)

    def scopes(self) -> tuple[tuple[str, Scope], ...]:
        """The scopes a person approves at once, each with its label (the filters of the decision page)."""
        return (
            ("only the changing groups", self.changing),
            (
                "the changing groups and the keep-plans (every plan that differs from what Kafka would do)",
                self.differing,
            ),
            ("every validated plan (changing, keep and no-change plans)", self.offered),
        )

    def headline(self) -> str:
        """``63 groups change (67 moves, 12 warmups); 20 plans keep …; 31 groups need nothing``."""
        change = "changes" if len(self.change) == 1 else "change"
        # A group changing only its settings is counted here, not among "need nothing": say so.
        still = sum(1 for c in self.change if not (c.moves or c.warmups))
        quiet = f"; {count(still)} changing only {'its' if still == 1 else 'their'} settings" if still else ""
        parts = [
            f"{plural(len(self.change), 'group')} {change} ({plural(self.changing.moves, 'move')}, "
            f"{plural(self.changing.warmups, 'warmup')}{quiet})",
            f"{plural(len(self.keep), 'plan')} {'keeps' if len(self.keep) == 1 else 'keep'} the current assignment and "
            f"{'prevents' if len(self.keep) == 1 else 'prevent'} "
            f"{plural(self.prevented, 'KIP-441 move')}",
            f"{plural(len(self.nothing), 'group')} {'needs' if len(self.nothing) == 1 else 'need'} nothing",
        ]
        return "; ".join(parts)

    def subject(self, title: str) -> str:
        """The Required Actions subject: ``Nightly 2026-11-26: 114 plans, 63 change, 67 moves, longest 20 s``."""
        return (
            f"{title}: {plural(self.offered.groups, 'plan')}, {count(len(self.change))} change, "
            f"{plural(self.changing.moves, 'move')}, longest {duration(self.changing.longest_s)}"
        )


def kind(row: GroupRow) -> Kind:
    """What approving the group's plan does: the one place a plan is called a change, a keep or nothing (the
    totals, the row notes, the keep list and the filters all read it)."""
    if row.status == PlanStatus.NOOP:
        return Kind.NOTHING
    if row.status != PlanStatus.VALIDATED:
        return Kind.DECIDED
    if row.changes:
        return Kind.CHANGE
    kip = row.baselines.get(Assignor.KIP441)
    return Kind.KEEP if kip is not None and kip.moves > 0 else Kind.NOTHING


def why(row: GroupRow, k: Kind) -> str:
    """One line: what in the group makes the plan do what it does."""
    reasons = []
    if row.draining:
        reasons.append(f"drains {', '.join(row.draining)}")
    risk = row.risk
    if risk is not None and risk.idle_instances:
        idle = risk.idle_instances
        names = ", ".join(idle[:3]) + ("…" if len(idle) > 3 else "")
        reasons.append(f"{plural(len(idle), 'instance')} holding nothing ({names}): joined or restarted")
    if risk is not None and risk.stale_reports:
        reasons.append(f"{plural(risk.stale_reports, 'instance')} stopped reporting (left?)")
    if row.skew_before is not None and row.skew_after is not None and row.skew_before > row.skew_after:
        reasons.append(
            f"imbalance: skew {row.skew_before:.2f} → {row.skew_after:.2f} "
            "active tasks per thread (most − least loaded)"
        )
    if k is Kind.CHANGE and row.plan is not None and row.plan.warmups:
        verb = "warms" if row.plan.warmups == 1 else "warm"
        reasons.append(f"{plural(row.plan.warmups, 'task')} {verb} up first (no caught-up copy where they go)")
    kip = row.baselines.get(Assignor.KIP441)
    if kip is not None and row.plan is not None and kip.moves > row.plan.moves:
        reasons.append(f"stops KIP-441 moving {plural(kip.moves - row.plan.moves, 'task')}")
    if row.settings_changes:
        reasons.append(f"settings change: {row.settings_changes}")
    if not reasons:
        if k is Kind.NOTHING:
            return "balanced, and KIP-441 would not move anything either" if kip is not None else "nothing to move"
        if k is Kind.DECIDED:
            return row.reason or row.status
        return "rebalances the load"
    return "; ".join(reasons)


def assess(row: GroupRow) -> tuple[Risk, tuple[str, ...]]:
    """The group's risk and the figures behind it (none for a plan that moves nothing)."""
    high: list[str] = []
    medium: list[str] = []
    low: list[str] = []  # figures shown that do not raise the risk
    r = row.risk
    if r is not None:
        if r.unsafe_moves:
            high.append(f"{plural(r.unsafe_moves, 'task')} moved without a caught-up copy")
        if not r.complete:
            members = "?" if r.members_in_group is None else count(r.members_in_group)
            high.append(f"{count(r.members_reporting)} of {members} instances reported")
        rate = r.assumptions.restore_rate if r.assumptions else None
        if r.largest_restore:
            text = f"largest restore {count(r.largest_restore)} offsets"
            seconds = r.largest_restore / rate if rate else None
            text += f" (~{duration(seconds)})" if seconds is not None else ""
            (medium if seconds is not None and seconds > LONG_RESTORE_S else low).append(text)
    if row.source_age_ms is not None and row.source_age_ms / 1000 > OLD_REPORT_S:
        high.append(f"reports {duration(row.source_age_ms / 1000)} old")
    if row.checks_total and row.checks_passed < row.checks_total:
        high.append(row.validation)
    if row.draining:
        medium.append("drain: instances to stop afterwards")
    if row.settings_changes:
        medium.append("settings change")
    if row.missing_offset_sums:
        medium.append("restore figure is a lower bound")
    level = Risk.HIGH if high else Risk.MEDIUM if medium else Risk.LOW
    return level, tuple(high + medium + low)


def choice(row: GroupRow) -> Choice:
    k = kind(row)
    level, figures = assess(row)
    kip = row.baselines.get(Assignor.KIP441)
    return Choice(row, k, why(row, k), level, figures, None if kip is None else kip.moves)


def scope(chosen: Sequence[Choice], offered: Sequence[Choice]) -> Scope:
    """What approving ``chosen`` among the ``offered`` plans does (the others are rejected)."""
    plans = [c.row.plan for c in chosen if c.row.plan is not None]
    picked = {c.group_id for c in chosen}
    left = [c for c in offered if c.kind is Kind.KEEP and c.group_id not in picked]
    return Scope(
        groups=len(chosen),
        moves=sum(p.moves for p in plans),
        warmups=sum(p.warmups for p in plans),
        restore_offsets=sum(p.restore_offsets for p in plans),
        longest_s=max((p.estimated_seconds for p in plans), default=None),
        kip441_moves=sum(c.kip441_moves or 0 for c in chosen),
        changing=sum(1 for c in chosen if c.kind is Kind.CHANGE),
        keeping=sum(1 for c in chosen if c.kind is Kind.KEEP),
        unchanged=sum(1 for c in chosen if c.kind is Kind.NOTHING),
        rejected=sum(1 for c in offered if c.group_id not in picked),
        keeps_left=len(left),
        kip441_left=sum(c.kip441_moves or 0 for c in left),
    )


def rank(c: Choice) -> tuple[int, int, float, str]:
    """Highest risk first, then the most different from KIP-441 (moves), then the longest."""
    diff = abs(c.moves - c.kip441_moves) if c.kip441_moves is not None else 0
    longest = c.row.plan.estimated_seconds if c.row.plan else 0.0
    return (c.risk.rank, -diff, -longest, c.group_id)


def triage(rows: Sequence[GroupRow]) -> Triage:
    """The snapshot's groups sorted into the decision."""
    choices = [choice(r) for r in rows]
    by_kind = {k: [c for c in choices if c.kind is k] for k in Kind}
    change = tuple(sorted(by_kind[Kind.CHANGE], key=rank))
    keep = tuple(sorted(by_kind[Kind.KEEP], key=lambda c: (-(c.kip441_moves or 0), c.group_id)))
    nothing = tuple(sorted(by_kind[Kind.NOTHING], key=lambda c: c.group_id))
    awaiting = (*change, *keep, *(c for c in nothing if c.row.status == PlanStatus.VALIDATED))
    return Triage(
        change=change,
        keep=keep,
        nothing=nothing,
        decided=tuple(sorted(by_kind[Kind.DECIDED], key=lambda c: (c.row.status, c.group_id))),
        awaiting=awaiting,
        offered=scope(awaiting, awaiting),
        changing=scope(change, awaiting),
        differing=scope((*change, *keep), awaiting),
    )


@dataclass(frozen=True)
class Versus:
    """The offered plans against one of Kafka's own assignors, on the groups it was computed for."""

    assignor: Assignor
    computed: int  # offered groups with this baseline
    fewer_moves: int  # groups where the plan moves fewer tasks
    as_good: tuple[str, ...]  # groups where the baseline moves and restores no more than the plan, in no more time
    faster: int  # groups where the baseline would finish sooner

    def sentence(self) -> str:
        """Why the plan, and where the baseline would be as good, in one or two sentences."""
        if not self.computed:
            return f"{self.assignor.label}: not computed."
        text = (
            f"{self.assignor.label}, on {plural(self.computed, 'group')}: the plan moves fewer tasks in "
            f"{count(self.fewer_moves)}"
        )
        if self.faster:
            text += (
                f"; it would finish sooner in {count(self.faster)}, by moving actives before a caught-up copy exists "
                "(fewer warmups, but each such task is unavailable while it restores), where the plan warms up first "
                "(availability)"
            )
        if self.as_good:
            names = ", ".join(self.as_good[:5]) + ("…" if len(self.as_good) > 5 else "")
            text += f". It would do as well in {count(len(self.as_good))} ({names}): leaving them to it is as good"
        return text + "."


def versus(rows: Sequence[GroupRow]) -> tuple[Versus, ...]:
    """Why not Kafka's own assignors: per baseline, where the offered plans beat it and where it would be as good."""
    offered = [r for r in rows if r.status == PlanStatus.VALIDATED and r.plan is not None]
    out = []
    for a in (Assignor.KIP441, Assignor.STREAMS_BROKER):
        pairs = [(r, r.baselines[a]) for r in offered if a in r.baselines]
        out.append(
            Versus(
                a,
                len(pairs),
                sum(1 for r, b in pairs if r.plan is not None and r.plan.moves < b.moves),
                tuple(
                    sorted(
                        r.group_id
                        for r, b in pairs
                        if r.plan is not None
                        and (r.plan.moves or r.plan.warmups)
                        and b.moves <= r.plan.moves
                        and b.restore_offsets <= r.plan.restore_offsets
                        and b.estimated_seconds <= r.plan.estimated_seconds
                    )
                ),
                sum(1 for r, b in pairs if r.plan is not None and b.estimated_seconds < r.plan.estimated_seconds),
            )
        )
    return tuple(out)
