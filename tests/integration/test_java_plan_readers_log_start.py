"""The Java readers of the plans topic on a real broker whose partition's log start moved (issue 30, row 18): the
classic plugin's TopicPlanSource and the broker-side assignor's PlanReader start at the log start, not at offset 0
or the end, and a position left below a log start that moved resumes at the earliest remaining record, never at
the latest. Each reader runs in a test-scope Java entry point (tests/support/java_probe.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka.admin import AdminClient

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from assignor.protocol.plans import ApprovedPlan, Withdrawal
from jobs.local.broker import EmbeddedBroker
from tests.integration.test_runtime_plan_order import PLANS, _plans_topic
from tests.support.java_probe import JavaProbe
from tests.support.pipeline_kafka import produce
from tests.support.runtime_harness import wait_for
from tests.support.signing import SIGNER, VERIFY_KEYS

PLUGIN = ("plan-honoring-assignor", "io.rebalanceplanner.kafka.PlanSourceProbe")
BROKER_SIDE = ("broker-assignor", "io.rebalanceplanner.broker.PlanReaderProbe")
TASKS = [TaskId(0, p) for p in range(4)]
CONFIGS = AssignmentConfigs()
# Rounds of records deleted past a reader's position (_until_a_round_counts), at most.
ROUNDS = 5


def _plan(plan_id: str, group_id: str, sequence: int) -> tuple[bytes, bytes, None]:
    planned = plan_group(
        GroupState([ClientState("p1"), ClientState("p2")], frozenset(TASKS), frozenset(), dict.fromkeys(TASKS, 1_000)),
        CONFIGS,
    )
    now = int(time.time() * 1000)
    plan = ApprovedPlan(
        plan_id, group_id, "snap", now, now + 3_600_000, "alice", now, CONFIGS, planned.target,
        tuple(planned.move_order),
    )  # fmt: skip
    return group_id.encode(), json.dumps(plan.to_record(SIGNER, sequence)).encode(), None


def _withdrawal(plan_id: str, group_id: str, sequence: int) -> tuple[bytes, bytes, None]:
    record = Withdrawal(plan_id, group_id, int(time.time() * 1000), sequence).to_record(SIGNER)
    return group_id.encode(), json.dumps(record).encode(), None


def _delete_below(admin: AdminClient, offset: int) -> int:
    """Move the log start to ``offset`` (OFFSET_END: the end); the new log start."""
    (future,) = admin.delete_records([TopicPartition(PLANS, 0, offset)]).values()
    return int(future.result(10).low_watermark)


def _moved_log_start(broker: EmbeddedBroker) -> None:
    """Each group's plan replaced by a newer one; payments' then withdrawn; the log start past both old plans."""
    admin = _plans_topic(broker)
    produce(
        broker.bootstrap,
        PLANS,
        [
            _plan("orders-old", "orders", 1),
            _plan("payments-old", "payments", 1),
            _plan("orders-new", "orders", 2),
            _plan("payments-new", "payments", 2),
            _withdrawal("payments-new", "payments", 3),
        ],
    )
    assert _delete_below(admin, 2) == 2


def _probe(kind: tuple[str, str], broker: EmbeddedBroker, tmp_path: Path, *groups: str) -> JavaProbe:
    module, main = kind
    return JavaProbe(module, main, [broker.bootstrap, PLANS, VERIFY_KEYS.render(), *groups], tmp_path / module)


def _shown(probe: JavaProbe, holds: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """The broker-side reader's cache once ``holds`` is true of it (its thread reads on its own)."""
    shown: dict[str, Any] = {}

    def check() -> bool:
        shown.update(probe.ask("show"))
        return holds(shown)

    try:
        wait_for(check, 60, what)
    except AssertionError as err:
        raise AssertionError(f"{err}; the reader shows {shown}; its log:\n{probe.log_tail()}") from None
    return shown


def _move_log_start_past_unread_records(admin: AdminClient, broker: EmbeddedBroker, number: int) -> None:
    """Round ``number``: the group's plan deleted-N, never to be read, goes in and the log start moves past it to
    the end; then kept-N, the record a reader must not skip, goes in above the new log start."""
    # First, alone, a record of another key: it answers the fetch the reader left waiting on the broker (read or
    # not, it is harmless), so that no fetch of the reader's can return deleted-N before its deletion.
    produce(broker.bootstrap, PLANS, [(b"other", b"x", None)])
    produce(broker.bootstrap, PLANS, [_plan(f"deleted-{number}", "orders", 2 * number)])
    _delete_below(admin, OFFSET_END)
    produce(broker.bootstrap, PLANS, [_plan(f"kept-{number}", "orders", 2 * number + 1)])


def _until_a_round_counts(round_: Callable[[int], bool]) -> None:
    """Run ``round_`` until it returns True: False says the reader read deleted-N after all, so its position never
    fell below the log start (a fetch already on its way), and the round proves nothing; at most ROUNDS rounds."""
    for number in range(1, ROUNDS + 1):
        if round_(number):
            return
    raise AssertionError(f"in {ROUNDS} rounds the reader always read the records before their deletion")


def test_the_plugins_reader_started_past_a_moved_log_start_holds_the_newest_plan_and_withdrawal(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    _moved_log_start(broker)
    with _probe(PLUGIN, broker, tmp_path, "orders", "payments") as probe:
        read = probe.ask("read")
    # Started at offset 0 with reset to latest, or at the end, it would read nothing: no plan, no floor.
    assert read["orders"] == {
        "read": ["orders-new"],
        "verified": {"plan_id": "orders-new", "outcome": "PLAN", "sequence": 2},
        "honored": "orders-new",
    }
    assert read["payments"] == {
        "read": ["payments-new", "payments-new"],
        "verified": {"plan_id": "payments-new", "outcome": "WITHDRAWN", "sequence": 3},
        "honored": None,
    }


def test_the_broker_side_reader_started_past_a_moved_log_start_holds_the_newest_plan_and_withdrawal(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    _moved_log_start(broker)
    with _probe(BROKER_SIDE, broker, tmp_path, "orders", "payments") as probe:
        shown = _shown(probe, lambda s: bool(s["loaded"]), "the plans topic read to its end")
    assert shown["groups"] == {
        "orders": {"verified": {"plan_id": "orders-new", "outcome": "PLAN", "sequence": 2}, "honored": "orders-new"},
        "payments": {
            "verified": {"plan_id": "payments-new", "outcome": "WITHDRAWN", "sequence": 3},
            "honored": None,
        },
    }
    assert (shown["verified_records"], shown["rejected_records"]) == (3, 0)


def test_the_plugins_reader_below_a_log_start_that_moved_resumes_at_the_earliest_record_not_the_latest(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    admin = _plans_topic(broker)
    produce(broker.bootstrap, PLANS, [_plan("first", "orders", 1)])
    with _probe(PLUGIN, broker, tmp_path, "orders") as probe:
        assert probe.ask("read")["orders"]["honored"] == "first"

        def round_(number: int) -> bool:
            # The plugin reads only while a rebalance asks it to: between two reads its position stays put.
            _move_log_start_past_unread_records(admin, broker, number)
            read = probe.ask("read")["orders"]
            if f"deleted-{number}" in read["read"]:
                return False
            # Reset to latest, it would jump past kept-N to the end and keep honoring the plan before.
            assert read == {
                "read": [f"kept-{number}"],
                "verified": {"plan_id": f"kept-{number}", "outcome": "PLAN", "sequence": 2 * number + 1},
                "honored": f"kept-{number}",
            }
            return True

        _until_a_round_counts(round_)


def test_the_broker_side_reader_below_a_log_start_that_moved_resumes_at_the_earliest_record_not_the_latest(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    admin = _plans_topic(broker)
    produce(broker.bootstrap, PLANS, [_plan("first", "orders", 1)])
    with _probe(BROKER_SIDE, broker, tmp_path, "orders") as probe:
        _shown(probe, lambda s: bool(s["loaded"]) and s["groups"]["orders"]["honored"] == "first", "plan first held")

        def round_(number: int) -> bool:
            before = probe.ask("show")["verified_records"]
            # The reader follows the topic on its own thread: the JVM is held still while the log start moves.
            with probe.frozen():
                _move_log_start_past_unread_records(admin, broker, number)
            shown = _shown(
                probe,
                lambda s: s["groups"]["orders"]["honored"] == f"kept-{number}",
                f"kept-{number} (reset to latest, the reader would skip it and keep the plan before)",
            )
            if shown["verified_records"] == before + 2:  # deleted-N too: it was fetched before the deletion
                return False
            assert shown["verified_records"] == before + 1
            assert shown["groups"]["orders"]["verified"]["sequence"] == 2 * number + 1
            return True

        _until_a_round_counts(round_)
