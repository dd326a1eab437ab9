"""Faults around a streams-protocol group (KIP-1071) steered by our broker-side assignor (KIP-1357), on real parts:
its own embedded Kafka 4.4 broker (restartable, our assignor installed and trusting the test key) and three
reference-app JVMs on ``--group-protocol streams``. Plans are signed and sent directly (the pipeline's stages are
covered by test_streams_protocol_plan.py); our assignor is selected and triggered as publish and observe do.

The tests run in order on one group: a member leaving mid-plan, a tampered record, an expired plan, a replay after a
withdrawal, and a broker restart mid-plan. After every fallback each task runs on exactly one member (the broker's
``sticky`` result, which JUnit compares exactly), and no task is ever processed by two instances at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.protocol.plans import ApprovedPlan, Withdrawal
from assignor.runtime.kafka_io import read_latest_by_key
from assignor.task import TaskId
from jobs.kafka_topics import TopicSpec, ensure_topics
from jobs.live.read import read_streams_status
from jobs.local.broker import BrokerAssignor, EmbeddedBroker, broker_assignor_jar
from jobs.local.direct_plan import publish_record
from jobs.local.fleet_events import double_processing
from jobs.local.streams_fleet import StreamsFleet, StreamsFleetConfig, processed_once
from jobs.pipeline.streams_assignor import (
    ASSIGNOR_NAME,
    assignor_admin,
    latest_decision,
    select_assignor,
    trigger_assignment,
)
from jobs.polling import wait_until
from jobs.settings import Settings
from tests.support.signing import FORGER, SIGNER, VERIFY_KEYS
from tests.support.streams_holdings import Holdings, broker_holdings

APP = "streams-faults"
PARTITIONS = 4
RECORDS = 2_000
PLANS, DECISIONS = "plans", "_rebalance_assignor_decisions"
NAMES = ("a", "b", "c")


def live(bootstrap: str) -> Holdings:
    """Per process id, its (active, standby) tasks as the broker describes the group."""
    return broker_holdings(bootstrap, APP)


def each_task_once(holdings: Holdings, tasks: set[str], members: int) -> bool:
    """Every task active on exactly one of ``members`` processes (what sticky gives a group without standbys)."""
    actives = sorted(t for a, _ in holdings.values() for t in a)
    return len(holdings) == members and actives == sorted(tasks)


class Group:
    """The group under test: its broker, its instances, and what the tests publish and trigger."""

    def __init__(self, broker: EmbeddedBroker, fleet: StreamsFleet, settings: Settings) -> None:
        self.broker, self.fleet, self.settings = broker, fleet, settings
        self.sequence = int(time.time() * 1000)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def pids(self) -> list[str]:
        return [self.fleet.process_id(n) for n in NAMES]

    def next_sequence(self) -> int:
        """A sequence above every one sent so far (the assignor's replay floor)."""
        self.sequence = max(self.sequence + 1, int(time.time() * 1000))
        return self.sequence

    def whole_holdings(self) -> Holdings:
        """What the broker describes once it covers every task once over the three members: a description taken while
        a task is between owners leaves it out, and a plan built from that one falls back as tasks_changed."""
        seen: list[Holdings] = []

        def whole() -> bool:
            seen.append(live(self.bootstrap))
            return each_task_once(seen[-1], self.fleet.config.tasks, len(NAMES))

        wait_until(whole, 120, "the broker describing every task once", poll_s=1)
        return seen[-1]

    def plan_of_now(self, *, valid_for_ms: int = 3_600_000, plan_id: str | None = None) -> ApprovedPlan:
        """A plan whose target is what the group runs now (honored at once: no move needs a warm-up)."""
        now = int(time.time() * 1000)
        target = GroupAssignment(
            {
                p: ClientAssignment(active=frozenset(TaskId.parse(t) for t in a))
                for p, (a, _) in self.whole_holdings().items()
            }
        )
        return ApprovedPlan(
            plan_id or f"faults-{now}", APP, "faults", now, now + valid_for_ms, "tester", now,
            AssignmentConfigs(acceptable_recovery_lag=100), target, (),
        )  # fmt: skip

    def send(self, record: dict[str, Any] | bytes) -> None:
        publish_record(self.bootstrap, PLANS, APP, record)

    def decision_since(self, since_ms: int) -> dict[str, Any] | None:
        latest = read_latest_by_key(self.bootstrap, DECISIONS)
        found = latest_decision(latest, APP, self.pids(), since_ms)
        return found if isinstance(found, dict) else None

    def await_decision(
        self, since_ms: int, what: str, check: Any = lambda d: True, retrigger_s: float | None = None
    ) -> dict[str, Any]:
        """The first decision since ``since_ms`` that passes ``check`` (polled, bounded); with ``retrigger_s``,
        trigger again that often while only decisions failing ``check`` arrive."""
        seen: list[dict[str, Any]] = []
        last = time.monotonic()

        def arrived() -> bool:
            nonlocal last
            d = self.decision_since(since_ms)
            if d is not None and check(d):
                seen.append(d)
                return True
            if d is not None and retrigger_s is not None and time.monotonic() - last >= retrigger_s:
                self.trigger()
                last = time.monotonic()
            return False

        try:
            wait_until(arrived, 120, what, poll_s=1)
        except TimeoutError as err:
            raise AssertionError(f"{err}; newest decision: {self.decision_since(0)}") from None
        return seen[-1]

    def trigger(self) -> int:
        """Make the coordinator assign the group again, as publish and observe do; when (ms)."""
        since = int(time.time() * 1000)
        trigger_assignment(assignor_admin(self.settings, self.bootstrap), APP, self.settings.kafka_timeout_s)
        return since

    def trigger_until(self, what: str, check: Any) -> dict[str, Any]:
        """Trigger, and again while the newest decision fails ``check``: the broker's plans reader follows the topic
        on a thread of its own, so an assignment right after a send may still decide on the record before it (in
        production, observe's later triggers play this part)."""
        return self.await_decision(self.trigger(), what, check, retrigger_s=5)

    def shows_fallback(self, prefix: str) -> bool:
        """What ``status`` shows for the group (the broker's description and our assignor's newest decision)."""
        read = read_streams_status(self.settings, self.bootstrap, {DECISIONS}, {})
        shown = next((d for d in read.descriptions if d.group_id == APP), None)
        return shown is not None and (shown.fallback_reason or "").startswith(prefix)

    def broker_logged(self, text: str) -> bool:
        return text in self.broker.log_file.read_text(errors="replace")

    def settled_on(self, members: int) -> bool:
        """Every task active once over ``members`` processes, each instance processing what it holds."""
        assert len(self.fleet.live()) == members, [i.log_tail() for i in self.fleet.members()]
        return each_task_once(live(self.bootstrap), self.fleet.config.tasks, members) and processed_once(self.fleet)


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    """Three instances sharing every task on a broker of this module alone (it is restarted)."""
    data = tmp_path_factory.mktemp("kafka")
    assignor = BrokerAssignor(broker_assignor_jar(), VERIFY_KEYS.render(), PLANS)
    with EmbeddedBroker(data_dir=data, assignor=assignor) as broker:
        ensure_topics({"bootstrap.servers": broker.bootstrap}, [TopicSpec(PLANS, compacted=True)])
        config = StreamsFleetConfig(
            bootstrap=broker.bootstrap,
            root=tmp_path_factory.mktemp("fleet"),
            application_id=APP,
            partitions=PARTITIONS,
            plugin=False,
            group_protocol="streams",
        )
        root = tmp_path_factory.mktemp("settings")
        settings = Settings(lake_root=root / "lake", plans_topic=PLANS, kafka_timeout_s=60)
        with StreamsFleet(config) as fleet:
            fleet.produce(RECORDS, keys=RECORDS)
            for name in NAMES:
                fleet.start(name)
            g = Group(broker, fleet, settings)
            wait_until(lambda: g.settled_on(3), 240, "three instances running every task once", poll_s=2)
            wait_until(lambda: fleet.changelog_records() >= RECORDS, 120, "the input counted", poll_s=1)
            # A first plan, honored: our assignor selected and triggered as publish does.
            plan = g.plan_of_now(plan_id="faults-first")
            g.send(plan.to_record(SIGNER, g.next_sequence()))
            assert select_assignor(settings, broker.bootstrap, {APP: g.pids()}, ASSIGNOR_NAME) == {APP: "plan"}
            yield g
            assert double_processing(fleet.members()) == [], "a task processed by two instances at once"


def test_a_member_leaving_mid_plan_falls_back_and_the_plan_resumes_when_it_returns(group: Group) -> None:
    c = group.fleet.process_id("c")
    left = int(time.time() * 1000)
    group.fleet.stop("c")  # a clean shutdown: the member leaves the group at once, which bumps the epoch
    d = group.await_decision(left, "a decision after c left", lambda d: d["outcome"] == "sticky")
    assert str(d["fallback_reason"]).startswith("departed_instances: ") and c in d["fallback_reason"], d
    wait_until(lambda: group.settled_on(2), 120, "a and b running every task once under sticky", poll_s=2)
    assert group.broker_logged("sticky assignment instead of the plan: departed_instances")

    back = int(time.time() * 1000)
    group.fleet.start("c")  # same state directory: same process id, which the plan names again
    d = group.await_decision(back, "the plan honored again", lambda d: d["outcome"] == "plan")
    assert d["plan_id"] == "faults-first", d
    wait_until(lambda: group.settled_on(3), 180, "the plan's target, c included", poll_s=2)


def test_a_tampered_record_is_never_honored_and_its_reason_is_carried(group: Group) -> None:
    # The previous test may leave the first plan mid-way (a warm-up not yet promoted): the group may still move a
    # task as that plan goes on, so what it runs is compared with the forged target, not with a moment before.
    wait_until(lambda: group.settled_on(3), 120, "the group settled before the forged record", poll_s=2)
    # Everything on a: a target the group does not run, with the signature of a key the broker does not trust.
    a = group.fleet.process_id("a")
    grabbing = group.plan_of_now(plan_id="faults-forged")
    every = frozenset(TaskId.parse(t) for t in group.fleet.config.tasks)
    grabbing = ApprovedPlan(
        grabbing.plan_id, APP, "faults", grabbing.created_at, grabbing.valid_until, "mallory", grabbing.approved_at,
        grabbing.configs, GroupAssignment({a: ClientAssignment(active=every)}), (),
    )  # fmt: skip
    group.send(grabbing.to_record(FORGER, group.next_sequence()))
    d = group.trigger_until("a decision refusing the forged record", lambda d: d["rejected_record"] is not None)
    # The verified plan stays honored (a record that does not verify undoes nothing), the refusal is reported.
    assert (d["outcome"], d["plan_id"]) == ("plan", "faults-first"), d
    assert str(d["rejected_record"]).startswith("bad_signature: "), d
    assert group.broker_logged("rejected: bad_signature")
    wait_until(lambda: group.settled_on(3), 120, "every task once on the three members", poll_s=2)
    assert len(live(group.bootstrap)[a][0]) < len(every), "a runs every task: the forged target was honored"


def test_an_expired_plan_falls_back_to_sticky_with_the_reason(group: Group) -> None:
    plan = group.plan_of_now(valid_for_ms=1, plan_id="faults-expired")  # verified, valid until 1 ms later
    group.send(plan.to_record(SIGNER, group.next_sequence()))
    d = group.trigger_until("the expired plan's decision", lambda d: "faults-expired" in str(d["fallback_reason"]))
    assert d["outcome"] == "sticky" and str(d["fallback_reason"]).startswith("expired: plan faults-expired"), d
    assert d["rejected_record"] is None, "the newest record verified: nothing refused"
    wait_until(lambda: group.settled_on(3), 120, "every task once under sticky", poll_s=2)
    assert group.shows_fallback("expired: plan faults-expired")  # what `status` shows for the group


def test_a_replay_after_a_withdrawal_falls_back_as_replayed(group: Group) -> None:
    plan = group.plan_of_now(plan_id="faults-replayed")
    record = plan.to_record(SIGNER, group.next_sequence())
    group.send(record)
    group.trigger_until("the plan honored", lambda d: d["plan_id"] == "faults-replayed")
    withdrawn = Withdrawal(plan.plan_id, APP, int(time.time() * 1000), group.next_sequence())
    group.send(withdrawn.to_record(SIGNER))
    d = group.trigger_until("the withdrawal's decision", lambda d: d["outcome"] != "plan")
    assert d["outcome"] == "sticky" and str(d["fallback_reason"]).startswith("withdrawn: "), d
    # The same signed record again: its sequence is below the withdrawal's.
    group.send(record)
    d = group.trigger_until("the replay's decision", lambda d: "withdrawn: " not in str(d["fallback_reason"]))
    assert d["outcome"] == "sticky" and str(d["fallback_reason"]).startswith("replayed: "), d
    assert d["group_id"] == APP, "matched by the withdrawn plan's process ids"
    wait_until(lambda: group.settled_on(3), 120, "every task once under sticky", poll_s=2)
    assert group.shows_fallback("replayed: ")


def test_a_broker_restart_mid_plan_resumes_the_plan(group: Group) -> None:
    plan = group.plan_of_now(plan_id="faults-restart")
    group.send(plan.to_record(SIGNER, group.next_sequence()))
    group.trigger_until("the plan honored", lambda d: d["plan_id"] == "faults-restart")
    group.broker.stop()
    group.broker.start()
    # The first assignment after the start falls back (plans_unreadable: the reader starts with it); publish and
    # observe trigger again on that reason, as confirm_first_step does here.
    since = group.trigger()
    d = group.await_decision(since, "a decision after the restart")
    if d["outcome"] == "sticky":
        assert str(d["fallback_reason"]).startswith("plans_unreadable: "), d
        since = group.trigger()
        d = group.await_decision(since, "the plan resumed", lambda d: d["outcome"] == "plan")
    assert d["plan_id"] == "faults-restart", d
    wait_until(lambda: group.settled_on(3), 180, "every task once after the restart", poll_s=2)
    target = {p: {str(t) for t in c.active} for p, c in plan.target.clients.items()}
    wait_until(
        lambda: {p: a for p, (a, _) in live(group.bootstrap).items()} == target, 120, "the plan's target", poll_s=2
    )
