"""KIP-429 claims: a member dropped by the group rejoins claiming nothing; eager members claim nothing; when two
members claim one partition the leader keeps one claim by a fixed rule, whatever order the members arrive in."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from assignor import AssignmentConfigs, TaskId
from assignor.runtime.group_assignor import (
    COOPERATIVE_PROTOCOL_NAME,
    EAGER_PROTOCOL_NAME,
    FOLLOW_UP_MS,
    LeaderInputs,
    MemberView,
    PlanHonoringAssignor,
    Subtopology,
    Topology,
    consumer_mode,
)
from assignor.runtime.ownership import NO_GENERATION, Claim, resolve_claims
from assignor.runtime.protocol import AssignmentInfo, Partition, Subscription
from tests.support.signing import VERIFIER

TOPOLOGY = Topology((Subtopology(0, ("in",), ("chg",)),))
NOW = 1_700_000_000_000


def _given(partitions: list[int], active: list[int]) -> ConsumerProtocolAssignment:
    info = AssignmentInfo(active_tasks={TaskId(0, p): (("in", p),) for p in active})
    return ConsumerProtocolAssignment(version=0, assigned_partitions=[("in", partitions)], user_data=info.encode())


def _claimed(subscription: Any) -> list[Partition]:
    return [(tp.topic, p) for tp in subscription.owned_partitions for p in tp.partitions]


def test_a_member_the_group_dropped_rejoins_claiming_nothing() -> None:
    member = MemberView("p1")
    assignor = PlanHonoringAssignor(TOPOLOGY, member, cast(LeaderInputs, None))
    assignor.on_assignment(_given([0, 1], [0, 1]), 7)
    before: Any = assignor.metadata(["in"])
    assert _claimed(before) == [("in", 0), ("in", 1)] and before.generation_id == 7
    member.lose()
    after: Any = assignor.metadata(["in"])
    assert _claimed(after) == [] and after.generation_id == NO_GENERATION
    assert Subscription.decode(after.user_data).previous_active == frozenset()


def test_revoked_partitions_are_no_longer_claimed() -> None:
    member = MemberView("p1")
    assignor = PlanHonoringAssignor(TOPOLOGY, member, cast(LeaderInputs, None))
    assignor.on_assignment(_given([0, 1], [0, 1]), 7)
    member.revoke([("in", 0)])
    assert _claimed(assignor.metadata(["in"])) == [("in", 1)]


def test_an_eager_member_claims_nothing_and_the_two_protocols_have_their_own_names() -> None:
    member = MemberView("p1")
    mode = consumer_mode([RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER])
    cooperative = PlanHonoringAssignor(TOPOLOGY, member, cast(LeaderInputs, None), RebalanceProtocol.COOPERATIVE, mode)
    eager = PlanHonoringAssignor(TOPOLOGY, member, cast(LeaderInputs, None), RebalanceProtocol.EAGER, mode)
    cooperative.on_assignment(_given([0, 1], [0, 1]), 3)
    assert mode == RebalanceProtocol.EAGER
    assert _claimed(cooperative.metadata(["in"])) == _claimed(eager.metadata(["in"])) == []
    assert (cooperative.name, eager.name) == (COOPERATIVE_PROTOCOL_NAME, EAGER_PROTOCOL_NAME)
    assert RebalanceProtocol.EAGER in cooperative.supported_protocols()
    assert eager.supported_protocols() == [RebalanceProtocol.EAGER]
    assert consumer_mode([RebalanceProtocol.COOPERATIVE]) == RebalanceProtocol.COOPERATIVE


partitions = st.frozensets(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 5)), max_size=6)
claims = st.lists(
    st.builds(Claim, st.sampled_from([f"m{i}" for i in range(6)]), st.integers(-1, 4), partitions),
    max_size=5,
    unique_by=lambda c: c.member_id,
)


@given(claims, st.randoms(use_true_random=False))
def test_duplicate_claims_resolve_the_same_whatever_the_member_order(found: list[Claim], rng: Any) -> None:
    owners, conflicts = resolve_claims(found)
    shuffled = list(found)
    rng.shuffle(shuffled)
    assert resolve_claims(shuffled) == (owners, conflicts)
    assert set(owners) == {p for c in found for p in c.partitions}
    for partition, owner in owners.items():
        rivals = [(c.generation, c.member_id) for c in found if partition in c.partitions]
        best = max(g for g, _ in rivals)
        assert owner == min(m for g, m in rivals if g == best)  # highest generation, then smallest member id
    assert {c.partition for c in conflicts} == {p for p in owners if sum(p in c.partitions for c in found) > 1}
    for conflict in conflicts:
        assert conflict.kept[0] == owners[conflict.partition]
        assert {m for m, _ in conflict.dropped} == {
            c.member_id for c in found if conflict.partition in c.partitions
        } - {conflict.kept[0]}


@dataclass
class JoiningMember:
    member_id: str
    metadata: ConsumerProtocolSubscription


class Cluster:
    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return {0, 1, 2, 3} if topic in ("in", "chg") else None


def _leader() -> PlanHonoringAssignor:
    def ends(parts: Sequence[Partition]) -> Mapping[Partition, int]:
        return dict.fromkeys(parts, 0)

    inputs = LeaderInputs("g", AssignmentConfigs(), VERIFIER, ends, lambda _: (), lambda: NOW)
    return PlanHonoringAssignor(TOPOLOGY, MemberView("leader"), inputs)


def joining(member_id: str, process: str, generation: int, owned: list[int]) -> JoiningMember:
    sums = dict.fromkeys((TaskId(0, p) for p in owned), -2)
    user_data = Subscription(process, previous_active=frozenset(sums), task_offset_sums=sums).encode()
    claimed = [ConsumerProtocolSubscription.TopicPartition(topic="in", partitions=owned)] if owned else []
    metadata = ConsumerProtocolSubscription(
        version=2, topics=["in"], user_data=user_data, owned_partitions=claimed, generation_id=generation
    )
    return JoiningMember(member_id, metadata)


def _given_partitions(result: Mapping[str, ConsumerProtocolAssignment]) -> dict[str, list[int]]:
    return {m: sorted(tp.partition for tp in a.partitions()) for m, a in result.items()}


def test_the_leader_keeps_the_newest_claim_whatever_the_member_order_and_schedules_a_follow_up() -> None:
    # m-b missed that the group took partition 1 from it (generation 4); m-a got it in generation 6.
    members = [joining("m-a", "pa", 6, [0, 1]), joining("m-b", "pb", 4, [1, 2, 3]), joining("m-c", "pc", 6, [])]
    results = []
    for order in itertools.permutations(members):
        leader = _leader()
        result = leader.assign(Cluster(), list(order))
        results.append({m: (a.assigned_partitions, a.user_data) for m, a in result.items()})
        assert [(c.partition, c.kept, c.dropped) for c in leader.conflicts] == [(("in", 1), ("m-a", 6), (("m-b", 4),))]
    assert all(r == results[0] for r in results)
    owners = {0: "m-a", 1: "m-a", 2: "m-b", 3: "m-b"}  # m-b's stale claim on 1 is dropped
    final = _leader().assign(Cluster(), members)
    given = _given_partitions(final)
    for member_id, assignment in final.items():
        info = AssignmentInfo.decode(assignment.user_data)
        wanted = {t.partition for t in info.active_tasks}
        withheld = {p for p in wanted if owners[p] != member_id}
        assert set(given[member_id]) == wanted - withheld
        if withheld:  # the member waits for a revocation: a follow-up rebalance is scheduled in case none comes
            assert info.next_probing_rebalance_ms is not None
            assert info.next_probing_rebalance_ms <= NOW + FOLLOW_UP_MS
    assert any(
        owners[p] != m
        for m, a in final.items()
        for p in {t.partition for t in AssignmentInfo.decode(a.user_data).active_tasks}
    )
