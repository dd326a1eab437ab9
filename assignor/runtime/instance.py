"""One live instance of a stateful application: group membership, its tasks, and its state reports.

The kafka-python consumer is used for membership only (its partitions stay paused); input and changelogs
are read by the task runtime's own consumers, so tasks that keep their partitions go on processing while
a cooperative rebalance is in flight.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafka.structs import TopicPartition

from assignor.configs import AssignmentConfigs
from assignor.protocol.deferral import DeferralSettings
from assignor.protocol.plans import Verifier
from assignor.runtime.events import EventLog
from assignor.runtime.group_assignor import LeaderInputs, MemberView, PlanHonoringAssignor, Topology, consumer_mode
from assignor.runtime.kafka_io import ChangelogEndOffsets, PlanSource, ReportPublisher, kafka_python_security
from assignor.runtime.membership import poll_membership, subscribe_once_known
from assignor.runtime.processors import CountPerKey, TaskProcessor
from assignor.runtime.protocol import LATEST_VERSION
from assignor.runtime.reports import build_state_report
from assignor.runtime.state_dir import StateDirectory
from assignor.runtime.tasks import TaskManager

log = logging.getLogger(__name__)
EVENTS_FILE = "events.jsonl"


@dataclass(frozen=True)
class InstanceConfig:
    """Everything an instance needs, decided by whoever starts it (the fleet, a test, an application)."""

    group_id: str
    bootstrap: str
    state_dir: Path
    topology: Topology
    verifier: Verifier  # the public keys and clock skew plans are checked with
    configs: AssignmentConfigs = field(default_factory=AssignmentConfigs)
    plans_topic: str = "_rebalance_plans"
    reports_topic: str = "_rebalance_reports"
    kafka_config: Mapping[str, str] = field(default_factory=dict)
    capacity: int = 1
    client_tags: Mapping[str, str] = field(default_factory=dict)
    protocol_version: int = LATEST_VERSION  # the newest user data version this build speaks
    # The assignors offered, most preferred first: (EAGER,), (COOPERATIVE, EAGER) for the first bounce of an
    # upgrade (KIP-429: the consumer still runs EAGER), then (COOPERATIVE,).
    rebalance_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.COOPERATIVE,)
    report_interval_s: float = 10.0
    session_timeout_ms: int = 6_000
    heartbeat_interval_ms: int = 300
    corrupt_user_data: bool = False  # fault injection: send unreadable subscription user data
    processor: TaskProcessor = field(default_factory=CountPerKey)  # the application's logic for its active tasks
    deferral: DeferralSettings = field(default_factory=DeferralSettings)  # the leader's, when this one leads
    # How often a member that has led the group looks for a newly published plan (0: never; a settled group then
    # reads a new plan only at its next rebalance). A check that finds nothing new causes no rebalance.
    plan_check_interval_s: float = 300.0


class InstanceAssignor(PlanHonoringAssignor):
    """The plan-honoring assignor, writing each protocol step to the instance's event log."""

    def __init__(
        self,
        *args: Any,
        events: EventLog,
        assigned: threading.Event,
        processed: Callable[[], Mapping[str, int]] = dict,
        corrupt: bool = False,
        primary: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.events, self.processed, self.corrupt, self.primary = events, processed, corrupt, primary
        self.assigned = assigned  # shared by the instance's assignors: whichever the group picked sets it
        self._processed_at_join: Mapping[str, int] = {}

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolSubscription:
        subscription = super().metadata(topics)
        self._processed_at_join = self.processed()
        if self.primary:  # one event per JoinGroup, however many assignors it offers
            sums = self.member.offset_sums()
            self.events.emit(
                "joining",
                version=self.member.version,
                offset_sums={str(t): s for t, s in sums.items()},
                owned=sorted(f"{t}-{p}" for tp in subscription.owned_partitions for t, p in _pairs(tp)),
                mode=self.mode.name.lower(),
            )
        if not self.corrupt:
            return subscription
        return ConsumerProtocolSubscription(
            version=subscription.version,
            topics=subscription.topics,
            user_data=b"\x00not-json",
            owned_partitions=subscription.owned_partitions,
        )

    def on_assignment(self, assignment: ConsumerProtocolAssignment, generation: int) -> None:
        super().on_assignment(assignment, generation)
        info = self.member.info
        before, now = self._processed_at_join, self.processed()
        # KIP-429: what the tasks processed while the rebalance was in flight (JoinGroup sent -> assignment).
        during = {task: n - before.get(task, 0) for task, n in sorted(now.items()) if n > before.get(task, 0)}
        self.events.emit(
            "assigned",
            protocol=self.name,
            mode=self.mode.name.lower(),
            generation=generation,
            error_code=int(self.member.last_error_code),
            version=self.member.version,
            active=sorted(str(t) for t in info.active_tasks) if info else [],
            standby=sorted(str(t) for t in info.standby_tasks) if info else [],
            warmup=sorted(str(t) for t in info.warmup_tasks) if info else [],
            plan_id=info.plan_id if info else None,
            fallback_reason=info.fallback_reason if info else None,
            probing_at=info.next_probing_rebalance_ms if info else None,
            processed_while_joining=during,
        )
        self.assigned.set()

    def assign(self, cluster: Any, members: Sequence[Any]) -> dict[str, ConsumerProtocolAssignment]:
        result = super().assign(cluster, members)
        decision = self.member.decisions[-1] if self.member.decisions else None
        self.events.emit(
            "leader",
            members=len(members),
            owned={m.member_id[-8:]: _owned(m.metadata) for m in members},
            plan_id=decision.plan_id if decision else None,
            fallback_reason=decision.fallback_reason if decision else None,
            probing=decision.assignment.probing_rebalance_needed if decision else None,
            away=sorted(self.departures),
            held=sorted(str(t) for t in self.held),
        )
        for conflict in self.conflicts:
            self.events.emit(
                "claim_conflict",
                partition=f"{conflict.partition[0]}-{conflict.partition[1]}",
                kept=conflict.kept[0],
                kept_generation=conflict.kept[1],
                dropped=[{"member": m, "generation": g} for m, g in conflict.dropped],
            )
        del self.member.decisions[:-1]  # keep only the newest: an instance runs for days
        return dict(result)


class Instance:
    """Runs until ``stop`` is set: membership, tasks, reports, probing rebalances."""

    def __init__(self, config: InstanceConfig) -> None:
        self.config = config
        self.state = StateDirectory(config.state_dir)
        self.state.lock()  # before anything writes into it: a second instance on it stops here
        self.process_id = self.state.process_id
        self.events = EventLog(config.state_dir / EVENTS_FILE, f"{config.group_id}/{self.process_id[:8]}")
        self.stop = threading.Event()
        kafka = {"bootstrap.servers": config.bootstrap, **config.kafka_config}
        self.tasks = TaskManager(
            self.state, config.topology, kafka, self.events, config.processor, group_id=config.group_id
        )
        self.view = MemberView(
            process_id=self.process_id,
            capacity=config.capacity,
            client_tags=dict(config.client_tags),
            endpoint=f"{socket.gethostname()}:0",
            version=config.protocol_version,
            latest_supported_version=config.protocol_version,
            offset_sums=self.tasks.offset_sums,
        )
        self._end_offsets = ChangelogEndOffsets(config.bootstrap, config.kafka_config)
        self._plans = PlanSource(config.bootstrap, config.plans_topic, config.kafka_config)
        leader = LeaderInputs(
            group_id=config.group_id,
            configs=config.configs,
            verifier=config.verifier,
            changelog_end_offsets=self._end_offsets,
            plan_records=self._plans.records,
            now_ms=lambda: int(time.time() * 1000),
            deferral=config.deferral,
            remembered_sequence=self.state.plan_sequence,
            remember_sequence=self.state.remember_plan_sequence,
            key_revocations=self._plans.key_revocations,
            remembered_revoked_keys=self.state.revoked_keys,
            remember_revoked_keys=self.state.remember_revoked_keys,
        )
        self.assigned = threading.Event()
        mode = consumer_mode(config.rebalance_protocols)
        self.assignors = [
            InstanceAssignor(
                config.topology,
                self.view,
                leader,
                protocol,
                mode,
                events=self.events,
                assigned=self.assigned,
                processed=self.tasks.processed,
                corrupt=config.corrupt_user_data,
                primary=index == 0,
            )
            for index, protocol in enumerate(config.rebalance_protocols)
        ]
        self._reports = ReportPublisher(config.bootstrap, config.reports_topic, config.kafka_config)

    def run(self) -> None:
        """The task loop: reconcile tasks with the membership, restore and process, report."""
        config = self.config
        membership = _Membership(self)
        membership.start()
        if config.plan_check_interval_s > 0:
            threading.Thread(target=self._check_plans, name="plan-check", daemon=True).start()
        self.events.emit("start", process_id=self.process_id, version=config.protocol_version)
        seen_epoch = -1
        next_report = time.monotonic() + config.report_interval_s
        try:
            while not self.stop.is_set() and membership.is_alive():
                # KIP-429: the partitions owned stay owned (and processed) while a rebalance is in flight. What the
                # member owns and its assignment are read together: the rebalance listener gives partitions up
                # (revoked, or lost when the group dropped the member) before the member rejoins.
                with self.view.lock:
                    info, owned, epoch = self.view.info, frozenset(self.view.owned), self.view.owned_epoch
                if self.assigned.is_set() or epoch != seen_epoch:
                    changed_assignment = self.assigned.is_set()
                    self.assigned.clear()
                    seen_epoch = epoch
                    self.tasks.reconcile(info, owned, epoch)
                    if changed_assignment:
                        next_report = 0.0
                if self.tasks.step() == 0:
                    self.stop.wait(0.02)
                if time.monotonic() >= next_report:
                    self._report(membership)
                    next_report = time.monotonic() + config.report_interval_s
        finally:
            self.events.emit("shutdown", tasks=self.tasks.summary())
            self.tasks.close()
            self.stop.set()
            membership.join(30)
            self._end_offsets.close()
            self.events.close()
            self.state.unlock()
        if membership.error is not None:
            raise membership.error

    def _check_plans(self) -> None:
        """Every plan-check interval, read the group's plan record; a new one (to a member that has led the group)
        asks for a rebalance, in which the leader decides on it. Off the task loop: the read takes a while."""
        while not self.stop.wait(self.config.plan_check_interval_s):
            try:
                latest = self._plans(self.config.group_id)
            except Exception as err:  # a broker away: the next check tries again; nothing else depends on it
                log.warning("plan check of %s: plans topic not read: %s", self.config.group_id, err)
                continue
            changed = self.view.plan_changed(latest)
            if changed is None:
                continue
            self.events.emit("plan_check", changed=changed)
            if changed:
                self.view.request_rejoin()

    def _schedule_fields(self) -> dict[str, int | None]:
        """When this member looks at the plans topic next (for `rebalance-planner status`): the probing rebalance
        it holds, if any, and how often it checks for a newly published plan (0: never)."""
        info = self.view.info
        return {
            "next_rebalance_at": info.next_probing_rebalance_ms if info else None,
            "plan_check_interval_ms": int(self.config.plan_check_interval_s * 1000),
        }

    def _report(self, membership: _Membership) -> None:
        report = build_state_report(
            self.config.group_id,
            self.view,
            self.config.topology,
            member_id=membership.member_id,
            client_id=membership.client_id,
            host=socket.gethostname(),
            generation=membership.generation,
            reported_at=int(time.time() * 1000),
            configs=self.config.configs,
            restored_offsets=self.tasks.restored_offsets(),
        )
        report = replace(report, extra={**report.extra, **self._schedule_fields()})
        try:
            self._reports.publish(report)
        except Exception as err:  # a report lost is retried at the next interval; the tasks go on
            log.warning("state report not published: %s", err)


class _Membership(threading.Thread):
    """Polls the group consumer without pause: kafka-python 3.0.12 drops a JoinGroup that completes
    between two polls and sends a new one, so a loop doing other work between polls never settles."""

    def __init__(self, instance: Instance) -> None:
        super().__init__(name="membership", daemon=True)
        self.instance = instance
        self.client_id = f"{instance.config.group_id}-{instance.process_id[:8]}"
        self.member_id = ""
        self.generation = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        instance, config = self.instance, self.instance.config
        try:
            consumer = KafkaConsumer(
                bootstrap_servers=config.bootstrap,
                group_id=config.group_id,
                client_id=self.client_id,
                partition_assignment_strategy=instance.assignors,
                session_timeout_ms=config.session_timeout_ms,
                heartbeat_interval_ms=config.heartbeat_interval_ms,
                enable_auto_commit=False,
                **kafka_python_security(config.kafka_config),
            )
        except BaseException as err:
            self.error = err
            return
        try:
            handover = _HandOver(instance.view, instance.tasks, instance.events)
            subscribe_once_known(consumer, config.topology.source_topics, handover)
            while not instance.stop.is_set():
                if not poll_membership(consumer, timeout_ms=200):
                    instance.stop.wait(0.5)  # back off while the broker is unreachable
                    continue
                assigned = frozenset(consumer.assignment())
                if assigned - frozenset(consumer.paused()):
                    consumer.pause(*assigned)  # membership only: the task runtime reads the input itself
                generation = consumer._coordinator._generation
                self.member_id = str(generation.member_id or "")
                self.generation = max(int(generation.generation_id), 0)
                if instance.view.rejoin_due(int(time.time() * 1000)):
                    instance.events.emit("rejoin", epoch=instance.view.rejoin_epoch)
                    consumer._coordinator.request_rejoin()  # kafka-python has no public call for it
        except BaseException as err:
            self.error = err
            instance.stop.set()
        finally:
            consumer.close()


class _HandOver(ConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python is untyped
    """KIP-429: kafka-python calls this on its I/O thread after an assignment takes partitions away (cooperative),
    or before joining (eager, everything), and before the member rejoins to let them move: the tasks stop
    processing them, their last writes acknowledged and applied, before any other member can start them."""

    def __init__(self, view: MemberView, tasks: TaskManager, events: EventLog) -> None:
        self.view, self.tasks, self.events = view, tasks, events

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        partitions = frozenset((tp.topic, tp.partition) for tp in revoked)
        self.tasks.release(partitions, self.view.revoke(partitions))

    def on_partitions_lost(self, lost: Iterable[TopicPartition]) -> None:
        """The group dropped this member (session or poll timeout, fenced): another member may own these already,
        so the tasks close at once with nothing more written, and the member rejoins claiming nothing."""
        partitions = frozenset((tp.topic, tp.partition) for tp in lost)
        self.events.emit("lost", partitions=sorted(f"{t}-{p}" for t, p in partitions))
        self.tasks.lose(partitions, self.view.lose())

    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        """Nothing now: the task loop activates what the assignment names (after restoring)."""


def _pairs(tp: Any) -> list[tuple[str, int]]:
    return [(tp.topic, p) for p in tp.partitions]


def _owned(metadata: Any) -> list[str]:
    owned = getattr(metadata, "owned_partitions", None) or ()
    return sorted(f"{tp.topic}-{p}" for tp in owned for p in tp.partitions)
