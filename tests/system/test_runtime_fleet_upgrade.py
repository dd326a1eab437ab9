"""Eager groups and the eager -> cooperative upgrade by two rolling bounces (KIP-429), on real instance processes.

Eager and cooperative assignors have their own protocol names. First bounce: every instance offers both,
cooperative first, but keeps running EAGER (the group picks the cooperative assignor once all offer it). Second
bounce: cooperative only. No task is processed by two instances at once at any point, and every instance stops
what it gives up before it rejoins.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient

from assignor.runtime.group_assignor import COOPERATIVE_PROTOCOL_NAME, EAGER_PROTOCOL_NAME
from jobs.local.broker import EmbeddedBroker
from jobs.local.fleet import Fleet, InputLoad, InstanceProcess
from jobs.local.fleet_events import double_processing, last_event, processing_unclaimed_at_join, settled
from tests.support.fleet_harness import TASKS, fleet_config, start_settled
from tests.support.runtime_harness import wait_for

NAMES = ["i1", "i2", "i3"]


def group_protocol(bootstrap: str, group_id: str) -> str:
    """The assignor protocol the broker selected for the group."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_consumer_groups([group_id], request_timeout=10).values()
    return str(future.result().partition_assignor)


def bounce(fleet: Fleet, protocols: str) -> None:
    """Restart every instance in turn with these assignors, the group settled in between (a rolling bounce)."""
    for name in NAMES:
        fleet.stop("orders", name)
        fleet.start("orders", name, rebalance_protocols=protocols)
        wait_for(lambda: settled(fleet, "orders", TASKS), 120, f"the group to settle after bouncing {name}")


def protocols_seen(fleet: Fleet) -> set[tuple[str, str]]:
    """(protocol, mode) of each live instance's latest assignment."""
    seen = set()
    for instance in fleet.members("orders"):
        assigned = last_event(instance, "assigned")
        assert assigned is not None and instance.alive
        seen.add((assigned["protocol"], assigned["mode"]))
    return seen


def test_an_eager_group_upgrades_to_cooperative_by_two_rolling_bounces(broker: EmbeddedBroker, tmp_path: Path) -> None:
    with Fleet(fleet_config(broker.bootstrap, tmp_path)) as fleet:
        topology = fleet.create_group("orders")
        with InputLoad(broker.bootstrap, topology.source_topics, 60):
            start_settled(fleet, "orders", NAMES, rebalance_protocols="eager")
            assert group_protocol(broker.bootstrap, "orders") == EAGER_PROTOCOL_NAME
            assert protocols_seen(fleet) == {(EAGER_PROTOCOL_NAME, "eager")}

            bounce(fleet, "cooperative,eager")
            assert group_protocol(broker.bootstrap, "orders") == COOPERATIVE_PROTOCOL_NAME
            assert protocols_seen(fleet) == {(COOPERATIVE_PROTOCOL_NAME, "eager")}

            bounce(fleet, "cooperative")
            assert group_protocol(broker.bootstrap, "orders") == COOPERATIVE_PROTOCOL_NAME
            assert protocols_seen(fleet) == {(COOPERATIVE_PROTOCOL_NAME, "cooperative")}

        instances = fleet.members("orders")
        assert double_processing(instances) == []
        assert [v for i in instances for v in processing_unclaimed_at_join(i)] == []
        joins = [e for i in instances for e in i.events() if e["event"] == "joining"]
        assert any(e["mode"] == "eager" for e in joins) and any(e["owned"] for e in joins if e["mode"] == "cooperative")
        assert sum(cooperative_revocations(i) for i in instances) > 0  # the listener's cooperative path ran


def cooperative_revocations(instance: InstanceProcess) -> int:
    """Tasks an instance running COOPERATIVE stopped because the group took them (not at shutdown)."""
    mode, count = "", 0
    for e in instance.events():
        if e["event"] == "joining":
            mode = e["mode"]
        elif e["event"] == "stop" and e["why"] == "revoked" and mode == "cooperative":
            count += 1
    return count
