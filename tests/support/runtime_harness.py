"""Real kafka-python group members (one thread each) on the embedded broker, recording what they held."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.structs import TopicPartition

from assignor.runtime.group_assignor import LeaderInputs, MemberView, PlanHonoringAssignor, Topology
from assignor.runtime.membership import poll_membership, subscribe_once_known
from jobs.polling import wait_until


@dataclass
class Member:
    """One group member: its protocol view and every partition set it held, in order."""

    view: MemberView
    assignor: PlanHonoringAssignor
    held: list[tuple[float, frozenset[TopicPartition]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

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
        self._record(self.member.partitions - frozenset(revoked))

    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self._record(self.member.partitions | frozenset(assigned))


def _run(member: Member, bootstrap: str, group_id: str, topics: list[str]) -> None:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        partition_assignment_strategy=[member.assignor],
        session_timeout_ms=6_000,
        heartbeat_interval_ms=300,
        enable_auto_commit=False,
    )
    try:
        subscribe_once_known(consumer, topics, _Holdings(member))
        while not member.stop.is_set():
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

    def add(self, view: MemberView) -> Member:
        member = Member(view, self.assignor_factory(self.topology, view, self.leader))
        self.members[view.process_id] = member
        args = (member, self.bootstrap, self.group_id, self.topology.source_topics)
        thread = threading.Thread(target=_run, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()
        return member

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
