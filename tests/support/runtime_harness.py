"""Real kafka-python group members (one thread each) on the embedded broker, recording what they held."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.structs import TopicPartition

from assignor.runtime.group_assignor import LeaderInputs, MemberView, PlanHonoringAssignor, Topology, consumer_mode
from assignor.runtime.membership import poll_membership, subscribe_once_known
from jobs.polling import wait_until


@dataclass
class Member:
    """One group member: its protocol view and every partition set it held, in order."""

    view: MemberView
    assignors: list[PlanHonoringAssignor]
    held: list[tuple[float, frozenset[TopicPartition]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    # Cleared to stop the member's poll loop (the consumer's I/O thread goes on, heartbeats included): past its
    # poll timeout the member leaves the group and, once polled again, finds its generation lost.
    polling: threading.Event = field(default_factory=threading.Event)
    lost: list[frozenset[TopicPartition]] = field(default_factory=list)  # every loss kafka-python reported
    # Called on kafka-python's I/O thread after partitions were revoked, before the member rejoins.
    on_revoked: Callable[[frozenset[TopicPartition]], None] | None = None

    def __post_init__(self) -> None:
        self.polling.set()

    @property
    def assignor(self) -> PlanHonoringAssignor:
        return self.assignors[0]

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return self.held[-1][1] if self.held else frozenset()


class _Holdings(ConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python is untyped
    """Records what a member holds when kafka-python hands partitions over, not when a poll returns: a member
    gives partitions up before it rejoins, and a poll may return after another member already got them."""

    def __init__(self, member: Member) -> None:
        self.member = member

    def _record(self, now: frozenset[TopicPartition]) -> None:
        if not self.member.held or self.member.held[-1][1] != now:
            self.member.held.append((time.monotonic(), now))

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        gone = frozenset(revoked)
        self.member.view.revoke((tp.topic, tp.partition) for tp in gone)
        self._record(self.member.partitions - gone)
        if self.member.on_revoked is not None and gone:
            self.member.on_revoked(gone)

    def on_partitions_lost(self, lost: Iterable[TopicPartition]) -> None:
        gone = frozenset(lost)
        self.member.view.lose()
        self.member.lost.append(gone)
        self._record(self.member.partitions - gone)

    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self._record(self.member.partitions | frozenset(assigned))


def _run(member: Member, bootstrap: str, group_id: str, topics: list[str], max_poll_interval_ms: int) -> None:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        partition_assignment_strategy=member.assignors,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=300,
        max_poll_interval_ms=max_poll_interval_ms,
        enable_auto_commit=False,
    )
    try:
        subscribe_once_known(consumer, topics, _Holdings(member))
        while not member.stop.is_set():
            if not member.polling.is_set():
                member.polling.wait(0.1)  # stopped on purpose; waits for the test to let it poll again
                continue
            if not poll_membership(consumer, timeout_ms=100):
                member.stop.wait(0.5)  # back off while the broker is unreachable
                continue
            if member.view.rejoin_due(int(time.time() * 1000)):
                consumer._coordinator.request_rejoin()  # kafka-python has no public call for it
    except BaseException as err:
        member.error = err
    finally:
        consumer.close()


class Group:
    """Members of one consumer group, each a real kafka-python consumer in its own thread."""

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        topology: Topology,
        leader: LeaderInputs,
        assignor_factory: Callable[[Topology, MemberView, LeaderInputs], PlanHonoringAssignor] = PlanHonoringAssignor,
    ) -> None:
        self.bootstrap, self.group_id, self.topology, self.leader = bootstrap, group_id, topology, leader
        self.assignor_factory = assignor_factory
        self.members: dict[str, Member] = {}
        self._threads: list[threading.Thread] = []

    def add(
        self,
        view: MemberView,
        protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.COOPERATIVE,),
        max_poll_interval_ms: int = 300_000,
    ) -> Member:
        """Start a member offering an assignor per protocol, most preferred first (KIP-429's upgrade order)."""
        member = Member(view, [self._assignor(view, protocol, consumer_mode(protocols)) for protocol in protocols])
        self.members[view.process_id] = member
        args = (member, self.bootstrap, self.group_id, self.topology.source_topics, max_poll_interval_ms)
        thread = threading.Thread(target=_run, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()
        return member

    def _assignor(self, view: MemberView, protocol: RebalanceProtocol, mode: RebalanceProtocol) -> PlanHonoringAssignor:
        assignor = self.assignor_factory(self.topology, view, self.leader)
        assignor.protocol, assignor.mode = protocol, mode
        return assignor

    def close(self) -> None:
        for member in self.members.values():
            member.stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``condition`` until it holds; the test fails naming ``what`` when the deadline passes."""
    wait_until(condition, timeout_s, what, poll_s=0.1, error=AssertionError)
