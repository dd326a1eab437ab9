"""A kafka-python partition assignor that carries KIP-441 user data and honors approved plans.

Members subscribe with versioned user data (protocol.Subscription); the leader decodes every member,
negotiates the group's version (KIP-268), builds the GroupState, lets protocol.decision.decide choose between
the approved plan and the KIP-441 assignor, and hands each member its source partitions plus user data
naming its active, standby and warmup tasks. A partition another member still claims (KIP-429) is withheld
for one rebalance; the owner revokes it and rejoins, and the leader schedules a follow-up in case none comes.
The eager and the cooperative assignor have distinct protocol names, so a group upgrades by two rolling bounces.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafka.structs import TopicPartition

from assignor.assignment import GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.protocol.decision import LeaderDecision, decide, keep_previous, unreadable
from assignor.protocol.deferral import DeferralSettings, Departure, defer, pending_departures
from assignor.protocol.key_revocation import revoked_key_ids
from assignor.protocol.plan_ledger import PlanChoice, PlanLedger
from assignor.protocol.plans import Verifier
from assignor.runtime.ownership import NO_GENERATION, Claim, ClaimConflict, resolve_claims
from assignor.runtime.protocol import (
    LATEST_VERSION,
    AssignmentInfo,
    ErrorCode,
    NewerVersionError,
    Partition,
    ProtocolError,
    Subscription,
    negotiate_version,
    next_version,
)
from assignor.state import ClientState, GroupState
from assignor.task import TaskId
from schemas.kip441 import KIP441_NAMES

log = logging.getLogger(__name__)

# Consumer protocol subscription v1 carries owned partitions (KIP-429), v2 the generation they were given in.
_SUBSCRIPTION_VERSION = 2
COOPERATIVE_PROTOCOL_NAME = "rebalance-planner-cooperative"
EAGER_PROTOCOL_NAME = "rebalance-planner-eager"
# A member denied a partition another still claims gets a follow-up rebalance this soon, unless the owner's own
# rejoin (it revokes, then rejoins at once) brings a newer assignment first, which cancels it.
FOLLOW_UP_MS = 2_000


@dataclass(frozen=True)
class Subtopology:
    """One subtopology: the topics its tasks read, and the changelogs its state is rebuilt from."""

    id: int
    source_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...] = ()

    @property
    def stateful(self) -> bool:
        return bool(self.changelog_topics)


@dataclass(frozen=True)
class Topology:
    """The application's subtopologies; task (s, p) reads partition p of each source topic of s."""

    subtopologies: tuple[Subtopology, ...]

    @property
    def source_topics(self) -> list[str]:
        return sorted({t for s in self.subtopologies for t in s.source_topics})

    def tasks(self, partitions_of: Callable[[str], Iterable[int] | None]) -> dict[TaskId, Subtopology]:
        """Every task the cluster's partition counts define (a subtopology with unknown topics has none)."""
        tasks: dict[TaskId, Subtopology] = {}
        for sub in self.subtopologies:
            counts = [len(set(partitions_of(t) or ())) for t in sub.source_topics]
            for partition in range(max(counts, default=0)):
                tasks[TaskId(sub.id, partition)] = sub
        return tasks

    def source_partitions(self, task: TaskId) -> tuple[Partition, ...]:
        sub = self._sub(task)
        return tuple((topic, task.partition) for topic in sub.source_topics)

    def changelog_partitions(self, task: TaskId) -> tuple[Partition, ...]:
        sub = self._sub(task)
        return tuple((topic, task.partition) for topic in sub.changelog_topics)

    def _sub(self, task: TaskId) -> Subtopology:
        for sub in self.subtopologies:
            if sub.id == task.subtopology:
                return sub
        raise KeyError(f"task {task} belongs to no subtopology of the topology")


@dataclass(frozen=True)
class LeaderInputs:
    """What only the leader needs, injected so the assignor itself does no I/O of its own choosing."""

    group_id: str
    configs: AssignmentConfigs
    verifier: Verifier
    changelog_end_offsets: Callable[[Sequence[Partition]], Mapping[Partition, int]]
    plan_records: Callable[[str], Iterable[bytes | None]]  # the group's plans-topic records from the log start
    now_ms: Callable[[], int]
    deferral: DeferralSettings = field(default_factory=DeferralSettings)
    # The highest plan sequence acted on, kept where it survives a restart (the state directory), per group.
    remembered_sequence: Callable[[str], int | None] = lambda _group: None
    remember_sequence: Callable[[str, int], None] = lambda _group, _sequence: None
    # The key-revocation records met by the last plan_records scan, and the revoked key ids kept on disk.
    key_revocations: Callable[[], Iterable[bytes | None]] = tuple
    remembered_revoked_keys: Callable[[], frozenset[str]] = frozenset
    remember_revoked_keys: Callable[[frozenset[str]], None] = lambda _keys: None


@dataclass
class MemberView:
    """This member's side of the protocol: who it is, what it reports, what it was last told."""

    process_id: str
    capacity: int = 1
    client_tags: Mapping[str, str] = field(default_factory=dict)
    endpoint: str = ""
    version: int = LATEST_VERSION
    latest_supported_version: int = LATEST_VERSION
    offset_sums: Callable[[], Mapping[TaskId, int]] = dict
    info: AssignmentInfo | None = None
    # The input partitions the group gave this member in its latest generation: what it really owns (KIP-429),
    # which can be fewer than its active tasks' partitions while another member still has to revoke them.
    owned: tuple[tuple[str, int], ...] = ()
    owned_generation: int = NO_GENERATION  # the generation that gave ``owned``
    owned_epoch: int = 0  # bumped on every change to ``owned``: tells the task runtime a snapshot is stale
    rejoin_requested: bool = False
    last_error_code: ErrorCode = ErrorCode.NONE  # of the latest assignment (its info is kept only without error)
    rejoin_epoch: int = 0  # sent in the subscription; bumped so a deliberate rejoin really rebalances
    sent_epoch: int = 0  # the rejoin_epoch of the subscription sent last
    decisions: list[LeaderDecision] = field(default_factory=list)  # decisions taken while leader (newest last)
    # The plans topic's record for the group as this member last read or acted on it: a plan check asks for a
    # rebalance only when the topic holds something else.
    plan_seen: bytes | None = None
    plans: PlanLedger | None = None  # the group's plan records as last read and folded while leading
    # The consumer's I/O thread (subscription, assignment) and the member's own loop (rejoin_due) both change
    # info and the rejoin fields: one lock, or an assignment arriving mid-update is overwritten by the old one.
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def revoke(self, partitions: Iterable[tuple[str, int]]) -> int:
        """Give partitions up (an eager member gives up all before it rejoins): no longer claimed; the new epoch."""
        gone = set(partitions)
        with self.lock:
            self.owned = tuple(p for p in self.owned if p not in gone)
            self.owned_epoch += 1
            return self.owned_epoch

    def lose(self) -> int:
        """The group dropped this member (KIP-429 "lost"): it rejoins owning nothing and claiming no active task,
        since another member may hold them already; its standbys and warmups are its own to report. The new epoch."""
        with self.lock:
            self.owned, self.owned_generation = (), NO_GENERATION
            self.owned_epoch += 1
            if self.info is not None:
                self.info = replace(self.info, active_tasks={})
            return self.owned_epoch

    def request_rejoin(self) -> None:
        """Ask for a rebalance (an upgrade, an operator): served by the next ``rejoin_due``."""
        with self.lock:
            self.rejoin_requested = True

    def plan_changed(self, latest: bytes | None) -> bool | None:
        """A plan check: whether ``latest`` (the plans topic's record for the group now) is news to this member,
        None if it never led the group (the leader checks). Once told, the member counts it as seen: it asks for
        one rebalance per record, even if another member leads by then (which reads the record itself)."""
        with self.lock:
            if not self.decisions:
                return None
            if latest == self.plan_seen:
                return False
            self.plan_seen = latest
            return True

    def rejoin_due(self, now_ms: int) -> bool:
        """Whether this member must rejoin now: asked to (version change, error), or its probing time came."""
        with self.lock:
            due = self.rejoin_requested
            probing_at = self.info.next_probing_rebalance_ms if self.info else None
            if probing_at is not None and now_ms >= probing_at and self.info is not None:
                self.info = replace(self.info, next_probing_rebalance_ms=None)  # once per schedule
                due = True
            self.rejoin_requested = False
            if due:
                self.rejoin_epoch += 1
            return due


def consumer_mode(protocols: Sequence[RebalanceProtocol]) -> RebalanceProtocol:
    """The rebalance protocol of a consumer offering assignors for these protocols (kafka-python, like Kafka,
    runs the newest one all of them support): EAGER while any of them is the eager assignor."""
    return RebalanceProtocol.EAGER if RebalanceProtocol.EAGER in protocols else RebalanceProtocol.COOPERATIVE


class PlanHonoringAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """Partition assignor for Kafka Streams-style groups that follows approved plans.

    ``protocol`` picks the assignor (its name, what it supports); ``mode`` is the rebalance protocol the
    consumer runs, EAGER while it also offers the eager assignor (the first bounce of an upgrade, KIP-429)."""

    def __init__(
        self,
        topology: Topology,
        member: MemberView,
        leader: LeaderInputs,
        protocol: RebalanceProtocol = RebalanceProtocol.COOPERATIVE,
        mode: RebalanceProtocol | None = None,
    ) -> None:
        self.topology = topology
        self.member = member
        self.leader = leader
        self.protocol = protocol
        self.mode = protocol if mode is None else mode
        self.conflicts: list[ClaimConflict] = []  # duplicate claims met in the latest assignment as leader
        self.departures: dict[str, Departure] = {}  # members away whose place is kept (deferred resolution)
        self.held: frozenset[TaskId] = frozenset()  # tasks the latest deferred assignment left for their member

    @property
    def name(self) -> str:
        return COOPERATIVE_PROTOCOL_NAME if self.protocol == RebalanceProtocol.COOPERATIVE else EAGER_PROTOCOL_NAME

    def supported_protocols(self) -> list[RebalanceProtocol]:
        # Like Kafka's cooperative assignors, the cooperative one also serves a consumer still running EAGER.
        if self.protocol == RebalanceProtocol.COOPERATIVE:
            return [RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE]
        return [RebalanceProtocol.EAGER]

    # -- member side ---------------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolSubscription:
        with self.member.lock:
            info, version, latest = self.member.info, self.member.version, self.member.latest_supported_version
            self.member.sent_epoch = epoch = self.member.rejoin_epoch
            held, generation = self.member.owned, self.member.owned_generation
        previous_active = frozenset(info.active_tasks) if info else frozenset()
        previous_standby = frozenset(info.standby_tasks) | frozenset(info.warmup_tasks) if info else frozenset()
        subscription = Subscription(
            process_id=self.member.process_id,
            capacity=self.member.capacity,
            previous_active=previous_active,
            previous_standby=previous_standby,
            task_offset_sums=dict(self.member.offset_sums()),
            endpoint=self.member.endpoint,
            client_tags=self.member.client_tags,
            version=version,
            latest_supported_version=latest,
            rejoin_epoch=epoch,
        )
        owned = []
        if self.mode == RebalanceProtocol.COOPERATIVE:  # an eager member gave everything up before joining
            # What the member holds, not what its tasks were meant to hold: claiming a partition withheld from it
            # makes the leader wait for a revocation that never comes, and the partition stays unassigned.
            by_topic: dict[str, list[int]] = defaultdict(list)
            for topic, partition in held:
                by_topic[topic].append(partition)
            owned = [
                ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=sorted(ps))
                for t, ps in sorted(by_topic.items())
            ]
        return ConsumerProtocolSubscription(
            version=_SUBSCRIPTION_VERSION,
            topics=sorted(topics),
            user_data=subscription.encode(),
            owned_partitions=owned,
            generation_id=generation if owned else NO_GENERATION,
        )

    def on_assignment(self, assignment: ConsumerProtocolAssignment, generation: int) -> None:
        with self.member.lock:  # held whatever the user data says: the group gave these partitions
            self.member.owned = tuple(sorted((tp.topic, tp.partition) for tp in assignment.partitions()))
            self.member.owned_generation = generation
            self.member.owned_epoch += 1
        try:
            info = AssignmentInfo.decode(bytes(assignment.user_data or b""))
        except ProtocolError as err:
            log.error("unreadable assignment user data in generation %s: %s", generation, err)
            self.member.request_rejoin()
            return
        member = self.member
        with member.lock:
            version, rejoin = next_version(member.version, info, member.latest_supported_version)
            if version != member.version:
                log.info("protocol version %d -> %d (generation %s)", member.version, version, generation)
            member.version = version
            member.last_error_code = info.error_code
            # Rejoin for a version change (not for an error code: a malformed member retrying would churn), and
            # for a rejoin asked for after the JoinGroup this answers was sent: kafka-python lets a join already in
            # flight absorb a new request, which would then never be served.
            unserved = member.rejoin_epoch > member.sent_epoch
            member.rejoin_requested = member.rejoin_requested or rejoin or unserved
            if info.error_code is ErrorCode.NONE:
                member.info = info

    # -- leader side ---------------------------------------------------------------------------------

    def assign(self, cluster: Any, members: Sequence[Any]) -> dict[str, ConsumerProtocolAssignment]:
        readable: dict[str, Subscription] = {}
        versions: dict[str, tuple[int, int]] = {}
        malformed: dict[str, str] = {}
        claims: list[Claim] = []
        for member in members:
            metadata = member.metadata
            claimed = frozenset(
                (tp.topic, p) for tp in (getattr(metadata, "owned_partitions", None) or ()) for p in tp.partitions
            )
            generation = getattr(metadata, "generation_id", NO_GENERATION)
            claims.append(Claim(member.member_id, NO_GENERATION if generation is None else generation, claimed))
            try:
                sub = Subscription.decode(bytes(metadata.user_data or b""))
            except NewerVersionError as newer:
                versions[member.member_id] = (newer.version, newer.latest_supported_version)
                continue
            except ProtocolError as err:
                malformed[member.member_id] = str(err)
                log.warning("member %s sent malformed user data: %s", member.member_id, err)
                continue
            readable[member.member_id] = sub
            versions[member.member_id] = (sub.version, sub.latest_supported_version)
        decision = negotiate_version(versions, self.member.latest_supported_version)
        result: dict[str, ConsumerProtocolAssignment] = {}
        for member_id in decision.probing_members:
            probe = AssignmentInfo(
                error_code=ErrorCode.VERSION_PROBING,
                version=self.member.latest_supported_version,
                latest_supported_version=self.member.latest_supported_version,
            )
            result[member_id] = _empty(probe)
        for member_id in malformed:
            result[member_id] = _empty(AssignmentInfo(error_code=ErrorCode.MALFORMED_SUBSCRIPTION))
        owners, self.conflicts = resolve_claims(claims)
        for conflict in self.conflicts:
            log.warning(
                "partition %s-%d claimed by several members: kept %s (generation %d), dropped %s",
                *conflict.partition,
                *conflict.kept,
                ", ".join(f"{m} (generation {g})" for m, g in conflict.dropped),
            )
        working = {m: s for m, s in readable.items() if m not in decision.probing_members}
        if working:
            result.update(self._assign_working(cluster, working, owners, decision.group_version))
        return result

    def _assign_working(
        self,
        cluster: Any,
        subscriptions: Mapping[str, Subscription],
        owners: Mapping[Partition, str],
        version: int,
    ) -> dict[str, ConsumerProtocolAssignment]:
        tasks = self.topology.tasks(cluster.partitions_for_topic)
        stateful = frozenset(t for t, sub in tasks.items() if sub.stateful)
        changelogs = [p for t in sorted(stateful) for p in self.topology.changelog_partitions(t)]
        member_of: dict[str, str] = {}
        clients = []
        for member_id, sub in sorted(subscriptions.items()):
            if sub.process_id in member_of:
                log.warning(
                    "process %s joined twice (members %s, %s)", sub.process_id, member_of[sub.process_id], member_id
                )
                continue
            member_of[sub.process_id] = member_id
            known = set(tasks)
            clients.append(
                ClientState(
                    process_id=sub.process_id,
                    capacity=sub.capacity,
                    previous_active=sub.previous_active & known,
                    previous_standby=sub.previous_standby & stateful,
                    task_offset_sums={t: s for t, s in sub.task_offset_sums.items() if t in stateful},
                    client_tags=sub.client_tags,
                )
            )
        now = self.leader.now_ms()
        try:
            ends = self.leader.changelog_end_offsets(changelogs) if changelogs else {}
        except Exception as err:  # any failure to read (a broker restarting, a partition leader moving)
            log.warning(
                "leader of %s cannot read changelog end offsets, keeping the previous assignment: %s",
                self.leader.group_id,
                err,
            )
            choice = keep_previous(clients, frozenset(tasks), f"leader could not read changelog end offsets: {err}")
        else:
            end_sums = {t: sum(ends.get(p, 0) for p in self.topology.changelog_partitions(t)) for t in stateful}
            group = GroupState(clients, stateful, frozenset(tasks) - stateful, end_sums)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("leader sees %s", {c.process_id: dict(c.task_offset_sums) for c in clients})
            choice = decide(group, self.leader.configs, self._plans(now))
            choice = self._deferred(choice, group, now)
        self.member.decisions.append(choice)
        changed = settings_changes(choice.plan_configs, self.leader.configs)
        if changed:
            # The rule (docs/group-settings.md): a verified plan is honored with the settings a person approved (the
            # pipeline flagged the override); the application's own settings return with the fallback.
            log.warning("plan %s honored with its approved settings, not the group's: %s", choice.plan_id, changed)
        log.info(
            "leader decision for %s: plan=%s fallback=%s probing=%s",
            self.leader.group_id,
            choice.plan_id,
            choice.fallback_reason,
            choice.assignment.probing_rebalance_needed,
        )
        return self._encode(choice, member_of, owners, version, now)

    def _plans(self, now: int) -> PlanChoice | None:
        """The group's plan records folded from the log start over the floor remembered on disk; when they cannot
        be read, the plan verified last time while it is valid, else none: either way with ``plans_unreadable``."""
        group_id = self.leader.group_id
        try:
            floor = self.leader.remembered_sequence(group_id)
            ledger = PlanLedger(group_id).remember(floor)
            newest = None
            values = list(self.leader.plan_records(group_id))  # one scan: it also meets the key revocations
            kept = self.leader.remembered_revoked_keys()
            revoked = kept | revoked_key_ids(self.leader.key_revocations(), self.leader.verifier.keys)
            verifier = self.leader.verifier.revoking(revoked)
            for value in values:
                ledger, newest = ledger.offer(value, verifier, now), value
        except Exception as err:  # an unreadable topic is not "no plan": an authorization error included
            log.warning("leader of %s cannot read the plans topic: %s", group_id, err)
            last = self.member.plans.choice(now) if self.member.plans is not None else None
            reason = unreadable(f"{type(err).__name__}: {err}")
            return PlanChoice(last.plan if last else None, reason, last.sequence if last else None)
        with self.member.lock:
            self.member.plan_seen, self.member.plans = newest, ledger
        if revoked - kept:
            log.warning("leader of %s: plan-signing key(s) %s revoked", group_id, ", ".join(sorted(revoked - kept)))
            try:
                self.leader.remember_revoked_keys(revoked)
            except Exception:  # the topic still holds the revocation; only a restart after compaction loses it
                log.exception("leader of %s: revoked key ids not kept on disk", group_id)
        if ledger.highest_sequence is not None and ledger.highest_sequence != floor:
            try:
                self.leader.remember_sequence(group_id, ledger.highest_sequence)
            except Exception:  # the topic still holds it; only a restart after compaction loses the floor
                log.exception("leader of %s: plan sequence %d not kept on disk", group_id, ledger.highest_sequence)
        if ledger.verified is None and ledger.rejection is None:
            return None
        return ledger.choice(now)

    def _deferred(self, choice: LeaderDecision, group: GroupState, now: int) -> LeaderDecision:
        """While members that left are within the delay, keep everyone's tasks and rebalance at the deadline."""
        previous = self.member.decisions[-1].assignment if self.member.decisions else None
        self.held = frozenset()
        try:
            self.departures = pending_departures(previous, group, self.departures, now, self.leader.deferral)
            if not self.departures or previous is None:
                return choice
            deferral = defer(previous, group, self.leader.configs, self.departures, now, self.leader.deferral)
        except Exception:  # as the plugin: a fault in deferring must not take the leader down; assign without it
            log.exception("leader of %s: deferral failed, assigning without it", self.leader.group_id)
            self.departures = {}
            return choice
        self.held = deferral.held
        log.info(
            "leader of %s defers: %s away, %d task(s) held, rebalancing in %d ms",
            self.leader.group_id,
            sorted(self.departures),
            len(deferral.held),
            deferral.rebalance_in_ms,
        )
        # A plan that fits the members left is not what they run meanwhile: say so instead of naming it.
        reason = choice.fallback_reason
        if choice.plan_id is not None:
            reason = f"deferred: {len(self.departures)} member(s) away, plan {choice.plan_id} resumes after"
        return replace(
            choice,
            assignment=deferral.assignment,
            retry_in_ms=deferral.rebalance_in_ms,
            plan_id=None,
            fallback_reason=reason,
        )

    def _encode(
        self,
        choice: LeaderDecision,
        member_of: Mapping[str, str],
        owners: Mapping[Partition, str],
        version: int,
        now: int,
    ) -> dict[str, ConsumerProtocolAssignment]:
        assignment: GroupAssignment = choice.assignment
        # While a plan is honored its own probing interval paces the moves, not the instance's configured one.
        interval = choice.retry_in_ms or choice.probing_interval_ms or self.leader.configs.probing_rebalance_interval_ms
        probing_at = now + interval
        schedule_holder = min(member_of) if assignment.probing_rebalance_needed and member_of else None
        result = {}
        for pid, member_id in sorted(member_of.items()):
            ca = assignment.clients[pid]
            active = {t: self.topology.source_partitions(t) for t in sorted(ca.active)}
            partitions: list[TopicPartition] = []
            withheld = False
            for parts in active.values():
                for topic, p in parts:
                    # Claimed by another member (only cooperative members claim): it revokes first, and the
                    # follow-up rebalance lands the partition here.
                    if owners.get((topic, p)) not in (None, member_id):
                        withheld = True
                        continue
                    partitions.append(TopicPartition(topic, p))
            probing = probing_at if pid == schedule_holder else None
            if withheld:
                follow_up = now + FOLLOW_UP_MS
                probing = follow_up if probing is None else min(probing, follow_up)
            info = AssignmentInfo(
                active_tasks=active,
                standby_tasks={t: self.topology.changelog_partitions(t) for t in sorted(ca.standby)},
                warmup_tasks={t: self.topology.changelog_partitions(t) for t in sorted(ca.warmup)},
                plan_id=choice.plan_id,
                fallback_reason=choice.fallback_reason,
                next_probing_rebalance_ms=probing,
                version=version,
                latest_supported_version=version,
            )
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in partitions:
                by_topic[tp.topic].append(tp.partition)
            result[member_id] = ConsumerProtocolAssignment(
                version=0,
                assigned_partitions=[(t, sorted(ps)) for t, ps in sorted(by_topic.items())],
                user_data=info.encode(),
            )
        return result


def _empty(info: AssignmentInfo) -> ConsumerProtocolAssignment:
    return ConsumerProtocolAssignment(version=0, assigned_partitions=[], user_data=info.encode())


def settings_changes(plan: AssignmentConfigs | None, own: AssignmentConfigs) -> str:
    """``"num_standby_replicas 1 -> 0, ..."`` where an honored plan's settings differ from the group's own."""
    if plan is None:
        return ""
    changed = [n for n in KIP441_NAMES if getattr(own, n) != getattr(plan, n)]
    return ", ".join(f"{n} {getattr(own, n)} -> {getattr(plan, n)}" for n in changed)
