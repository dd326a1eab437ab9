"""KIP-429 on the real broker: a member the group dropped rejoins claiming nothing, and a cooperative rebalance
whose second round sees a new plan and a new member still ends with every partition owned exactly once.

Members are kafka-python consumers in threads of this process (tests.support.runtime_harness); a member holds a
partition from kafka-python's assignment to its revocation (or loss), so two members holding one partition at
overlapping times is what processing it twice would need.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafka.structs import TopicPartition

from assignor import ClientState, GroupState, TaskId, plan_group
from assignor.protocol.decision import LeaderDecision
from assignor.protocol.plans import ApprovedPlan
from assignor.runtime.group_assignor import MemberView, PlanHonoringAssignor
from assignor.runtime.protocol import Partition
from jobs.local.broker import EmbeddedBroker
from tests.integration.test_runtime_group import (
    CONFIGS,
    END,
    TASKS,
    TOPOLOGY,
    leader,
    overlapping_owners,
    running,
    settled,
    tasks_of,
    topics,
)
from tests.support.runtime_harness import Group, Member, wait_for
from tests.support.signing import SIGNER


@dataclass(frozen=True)
class Round:
    """One assignment the leader computed: its decision, and the partitions it withheld (still claimed elsewhere)."""

    members: int
    decision: LeaderDecision
    withheld: frozenset[Partition]


class _Recording(PlanHonoringAssignor):
    """Records every subscription it sends (the partitions it claims) and, as leader, every round it decides."""

    rounds: list[Round]  # shared by the group's members: the class attribute is set per test

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claims: list[frozenset[Partition]] = []

    def metadata(self, topics: Iterable[str]) -> Any:
        subscription = super().metadata(topics)
        self.claims.append(frozenset((tp.topic, p) for tp in subscription.owned_partitions for p in tp.partitions))
        return subscription

    def assign(self, cluster: Any, members: Any) -> Any:
        result = super().assign(cluster, members)
        decision = self.member.decisions[-1]
        given = {(tp.topic, tp.partition) for a in result.values() for tp in a.partitions()}
        wanted = {p for ca in decision.assignment.clients.values() for t in ca.active for p in _inputs(t)}
        self.rounds.append(Round(len(members), decision, frozenset(wanted - given)))
        return result


def _inputs(task: TaskId) -> tuple[Partition, ...]:
    return TOPOLOGY.source_partitions(task)


def caught_up(view: MemberView) -> MemberView:
    """A member with every task's state restored (a restarted instance, say): KIP-441 may give it actives at once."""
    view.offset_sums = lambda: dict.fromkeys(TASKS, END)
    return view


def owners_once(members: dict[str, Member]) -> bool:
    held = [tp for m in members.values() for tp in m.partitions]
    return len(held) == len(set(held)) == len(TASKS)


def test_a_member_dropped_by_the_group_rejoins_claiming_nothing(broker: EmbeddedBroker) -> None:
    topics(broker)
    _Recording.rounds = []
    with Group(broker.bootstrap, "orders", TOPOLOGY, leader({}), _Recording) as group:
        first = group.add(running(MemberView("p1")))
        wait_for(lambda: settled(group.members, 1), 60, "the first member")
        slow = group.add(running(MemberView("p2")), max_poll_interval_ms=3_000)
        wait_for(lambda: settled(group.members, 2), 60, "two members to settle")
        had = slow.partitions
        assert had and not slow.lost
        # p2 stops polling: past its poll timeout it leaves, and p1 takes every partition while p2 is away.
        stalled_at = time.monotonic()
        slow.polling.clear()
        wait_for(lambda: len(first.partitions) == len(TASKS), 60, "p1 to take p2's partitions")
        sent_before = len(slow.assignor.claims)
        slow.polling.set()
        wait_for(lambda: bool(slow.lost), 60, "p2 to learn it was dropped")
        # From its last poll to the loss it learns of in the next, p2 processes nothing (a poll loop application
        # does its work between polls); it gave everything up before that next poll returned.
        lost_at = next(t for t, parts in slow.held if t > stalled_at and not parts)
        assert slow.lost[0] == had  # lost, not revoked: kafka-python reports them as lost (KIP-429)
        wait_for(lambda: len(slow.assignor.claims) > sent_before, 60, "p2 to rejoin")
        assert slow.assignor.claims[sent_before] == frozenset()  # it rejoins claiming nothing
        wait_for(lambda: settled(group.members, 2), 60, "the two members to settle again")
        assert overlapping_owners(group.members, idle={"p2": (stalled_at, lost_at)}) == []
        assert all(not r.decision.fallback_reason for r in _Recording.rounds)
        assert all(m.error is None for m in group.members.values())


def test_a_plan_and_a_member_arriving_between_the_two_cooperative_rounds_leave_each_partition_owned_once(
    broker: EmbeddedBroker,
) -> None:
    topics(broker)
    _Recording.rounds = []
    plan: dict[str, bytes | None] = {}
    with Group(broker.bootstrap, "orders", TOPOLOGY, leader(plan), _Recording) as group:
        for pid in ("p1", "p2"):
            group.add(running(MemberView(pid)))
        wait_for(lambda: settled(group.members, 2), 60, "two members to settle")
        live = [ClientState(pid, previous_active=frozenset(tasks_of(m))) for pid, m in group.members.items()]
        clients = [*live, ClientState("p3"), ClientState("p4")]
        group_state = GroupState(clients, frozenset(TASKS), frozenset(), dict.fromkeys(TASKS, END))
        planned = plan_group(group_state, CONFIGS)
        now = int(time.time() * 1000)
        record = ApprovedPlan(
            "plan-9", "orders", "snap", now, now + 600_000, "alice", now, CONFIGS, planned.target, ()
        ).to_record(SIGNER)
        hooked = threading.Event()
        failures: list[str] = []
        decided_before_hook: list[int] = []  # rounds the leader had decided when a member first gave partitions up

        def between_rounds(revoked: frozenset[TopicPartition]) -> None:
            """Round 1 took partitions from this member; before it rejoins, a plan arrives and p4 joins."""
            if hooked.is_set():
                return
            decided_before_hook.append(len(_Recording.rounds))
            hooked.set()
            plan["orders"] = json.dumps(record).encode()
            newcomer = group.add(caught_up(MemberView("p4")))
            # The broker asks a new member to join again with the member id it assigns (KIP-394): the second
            # JoinGroup is the one that enters the group, and it goes out before this member rejoins.
            try:
                wait_for(lambda: len(newcomer.assignor.claims) >= 2, 20, "p4's JoinGroup")
            except AssertionError as err:  # raised here it would only reach kafka-python's listener handling
                failures.append(str(err))

        for member in group.members.values():
            member.on_revoked = between_rounds
        first_round = len(_Recording.rounds)
        group.add(caught_up(MemberView("p3")))  # caught up: KIP-441 moves actives to it at once
        wait_for(hooked.is_set, 60, "a round that moves an active to p3")
        wait_for(
            lambda: (
                settled(group.members, 4)
                and all(tasks_of(m) == set(planned.target.clients[p].active) for p, m in group.members.items())
            ),
            120,
            "the group to reach the plan",
        )
        assert failures == []
        # The round whose revocation ran the hook is the last one decided before it; on a loaded machine a member
        # may be slow to give partitions up and the leader decide that same move again first, so it is found by
        # when the hook ran, not as the first round that withheld anything.
        moving = _Recording.rounds[decided_before_hook[0] - 1]
        assert decided_before_hook[0] > first_round
        assert moving.withheld and moving.members == 3 and moving.decision.plan_id is None
        after = _Recording.rounds[decided_before_hook[0]]
        seen = [
            (r.members, r.decision.plan_id, r.decision.fallback_reason, sorted(r.withheld)) for r in _Recording.rounds
        ]
        assert (after.members, after.decision.plan_id) == (4, "plan-9"), seen  # both changed between the rounds
        assert owners_once(group.members)
        assert overlapping_owners(group.members) == []
        assert all(m.error is None for m in group.members.values())
