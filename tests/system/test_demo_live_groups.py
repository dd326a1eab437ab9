"""The demo's live groups (jobs/demo/live.py): every one a Kafka Streams application, the reference app's JVMs with
the plugin and the light footprint (small heap, C1 only, one bounded RocksDB budget per JVM), on the real broker.

The whole demo (Airflow, the pipeline, the approval) is `make demo`; this checks the part it adds to the fleets:
that the light JVMs settle, report through the plugin, and restore state from the changelog."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from jobs.demo.live import INSTANCES, LIVE_GROUPS, RECORDS, LiveGroups
from jobs.local.broker import EmbeddedBroker
from jobs.local.streams_fleet import LIGHT, StreamsFleet, processed_once, restored_records, standby_restored_records
from jobs.polling import wait_until
from jobs.settings import Kip441Settings, Settings
from tests.support.kafka_isolation import isolated
from tests.support.signing import VERIFY_KEYS

KIP441 = Kip441Settings(
    acceptable_recovery_lag=100, max_warmup_replicas=2, num_standby_replicas=1, probing_rebalance_interval_ms=10_000
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, kafka: EmbeddedBroker) -> Iterator[LiveGroups]:
    """The demo's three live groups, settled and with their changelogs written."""
    root = tmp_path_factory.mktemp("demo-live")
    with isolated(kafka) as broker, ExitStack() as stack:
        settings = Settings(
            lake_root=root / "lake", kafka_bootstrap=broker.bootstrap, plan_verify_keys=VERIFY_KEYS.render(),
            kip441=KIP441, reports_topic="demo-live-reports", plans_topic="demo-live-plans",
        )  # fmt: skip
        groups = LiveGroups(settings, root / "fleet")
        groups.start(stack)
        wait_until(groups.processed_once, 300, "the live groups to settle", poll_s=1)
        fleets = groups.fleets.values()
        wait_until(lambda: all(f.changelog_records() >= RECORDS for f in fleets), 180, "the input to be counted")
        yield groups


def reports_show_every_task_running(fleet: StreamsFleet) -> bool:
    """The plugin's newest reports name every live instance, and their active tasks are all the group's tasks."""
    reports = fleet.reports()
    pids = {i.process_id for i in fleet.live()}
    held = sorted(t for p in pids if p in reports for t in reports[p]["active_tasks"])
    return pids <= set(reports) and held == sorted(fleet.config.tasks)


def test_every_live_group_is_a_kafka_streams_application_that_reports_through_the_plugin(live: LiveGroups) -> None:
    assert set(live.fleets) == set(LIVE_GROUPS)
    fleets = live.fleets.values()
    for fleet in fleets:
        assert (fleet.config.jvm_options, fleet.config.rocksdb_memory_mb) == (
            LIGHT.jvm_options,
            LIGHT.rocksdb_memory_mb,
        )
        assert len(fleet.live()) == len(INSTANCES)
    wait_until(lambda: all(reports_show_every_task_running(f) for f in fleets), 90, "reports of the settled groups")
    origins = {r["origin"] for f in fleets for r in f.reports().values()}
    assert origins == {"kafka-streams"}


def test_a_light_instance_that_lost_its_state_loads_it_again_from_the_changelog(live: LiveGroups) -> None:
    fleet = live.fleets[LIVE_GROUPS[-1]]
    fleet.kill("i3")
    shutil.rmtree(fleet.state_dir("i3"))
    restarted = fleet.start("i3")

    def loaded() -> bool:
        return sum(restored_records([restarted]).values()) + sum(standby_restored_records([restarted]).values()) > 0

    wait_until(loaded, 120, "the emptied instance to load state from the changelog", poll_s=1)
    wait_until(lambda: processed_once(fleet), 120, "the group to process every task once again", poll_s=1)
