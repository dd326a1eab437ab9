"""The task runtime on the real broker: the input position never passes a write the changelog lacks, and the
application's processor is the runtime's only idea of what a task does."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource  # type: ignore[attr-defined]

from assignor import TaskId
from assignor.runtime.events import EventLog, read_events
from assignor.runtime.group_assignor import Subtopology, Topology
from assignor.runtime.processors import ChangelogWrite, InputRecord, StoreReader, TaskProcessor
from assignor.runtime.protocol import AssignmentInfo
from assignor.runtime.state_dir import StateDirectory
from assignor.runtime.tasks import TaskManager
from jobs.kafka_topics import TopicSpec, ensure_topics
from jobs.local.broker import EmbeddedBroker
from jobs.polling import wait_until

INPUT, CHANGELOG = "tally-input", "tally-changelog"
TASK = TaskId(0, 0)
TOO_BIG = "k" * 4_000  # its changelog record is over the changelog topic's max.message.bytes


@pytest.fixture
def manager(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[TaskManager]:
    kafka = {"bootstrap.servers": broker.bootstrap}
    ensure_topics(kafka, [TopicSpec(INPUT), TopicSpec(CHANGELOG, compacted=True, config={"max.message.bytes": "1024"})])
    events = EventLog(tmp_path / "events.jsonl", "tally")
    topology = Topology((Subtopology(0, (INPUT,), (CHANGELOG,)),))
    tasks = TaskManager(StateDirectory(tmp_path / "state"), topology, kafka, events, group_id="tally")
    tasks.reconcile(AssignmentInfo(active_tasks={TASK: ((INPUT, 0),)}), frozenset({(INPUT, 0)}))
    yield tasks
    tasks.close()
    events.close()


def produce(bootstrap: str, keys: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key in keys:
        producer.produce(INPUT, key=key, value=b"", partition=0)
    assert producer.flush(10) == 0


def stepping_until(tasks: TaskManager, condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    def stepped() -> bool:
        tasks.step()
        return condition()

    wait_until(stepped, timeout_s, what, poll_s=0.01)


def position(tasks: TaskManager) -> int | None:
    return tasks.tasks[TASK].store.input_position((INPUT, 0))


def count(tasks: TaskManager, key: str) -> int | None:
    stored = tasks.tasks[TASK].store.get(key)
    return None if stored is None else int(json.loads(stored)["count"])


def test_a_refused_changelog_write_holds_the_input_position_until_the_record_is_reprocessed(
    broker: EmbeddedBroker, manager: TaskManager, tmp_path: Path
) -> None:
    produce(broker.bootstrap, ["a", "b"])
    stepping_until(manager, lambda: position(manager) == 2, "the first two records committed")

    produce(broker.bootstrap, [TOO_BIG, "a", "c"])  # offsets 2, 3, 4

    def refused() -> bool:
        return any(e["event"] == "delivery_failed" for e in read_events(tmp_path / "events.jsonl"))

    stepping_until(manager, refused, "the broker refusing the oversized changelog write")
    failed = next(e for e in read_events(tmp_path / "events.jsonl") if e["event"] == "delivery_failed")
    assert failed["task"] == "0_0" and failed["input"] == f"{INPUT}-0" and failed["input_offset"] == 2
    assert failed["error"] and failed["retry_in_s"] > 0
    assert position(manager) == 2  # not past the record whose write the changelog does not hold
    assert count(manager, TOO_BIG) is None and count(manager, "a") == 1 and count(manager, "c") is None

    # While the write keeps failing (the task retries it after its pause), the position never moves past it.
    stepping_until(
        manager,
        lambda: sum(e["event"] == "delivery_failed" for e in read_events(tmp_path / "events.jsonl")) >= 2,
        "the retry failing again",
    )
    assert position(manager) == 2

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry("max.message.bytes", "1048588", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource("TOPIC", CHANGELOG, incremental_configs=[entry])]
    ).values():
        future.result(10)

    stepping_until(manager, lambda: position(manager) == 5, "the held records reprocessed once the topic takes them")
    # Reprocessed from the held record on, from the store as it was: nothing counted twice.
    assert {k: count(manager, k) for k in ("a", "b", "c", TOO_BIG)} == {"a": 2, "b": 1, "c": 1, TOO_BIG: 1}
    assert manager.processed() == {"0_0": 5}


class LatestValue:
    """Another application: each key's newest value, its changelog value starting with the input offset."""

    def process(self, task: TaskId, records: Sequence[InputRecord], store: StoreReader) -> list[ChangelogWrite]:
        return [ChangelogWrite(r.key, f"{r.offset}|{r.value}", r) for r in records]

    def resume_offset(self, value: str) -> int | None:
        head, sep, _ = value.partition("|")
        return int(head) if sep and head.isdigit() else None


def test_an_application_processor_runs_in_the_loop_and_a_restored_store_resumes_where_it_says(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    kafka = {"bootstrap.servers": broker.bootstrap}
    ensure_topics(kafka, [TopicSpec("latest-input"), TopicSpec("latest-changelog", compacted=True)])
    topology = Topology((Subtopology(0, ("latest-input",), ("latest-changelog",)),))
    owned = frozenset({("latest-input", 0)})
    info = AssignmentInfo(active_tasks={TASK: (("latest-input", 0),)})
    processor: TaskProcessor = LatestValue()

    def instance(name: str) -> tuple[TaskManager, EventLog]:
        events = EventLog(tmp_path / name / "events.jsonl", name)
        return TaskManager(
            StateDirectory(tmp_path / name), topology, kafka, events, processor, group_id="latest"
        ), events

    def send(pairs: list[tuple[str, str]]) -> None:
        producer = Producer(kafka)
        for key, value in pairs:
            producer.produce("latest-input", key=key, value=value, partition=0)
        assert producer.flush(10) == 0

    def at(tasks: TaskManager) -> int | None:
        return tasks.tasks[TASK].store.input_position(("latest-input", 0))

    first, first_events = instance("first")
    first.reconcile(info, owned)
    send([("k1", "v1"), ("k2", "v2"), ("k1", "v3")])
    stepping_until(first, lambda: at(first) == 3, "the first instance to process three records")
    assert first.tasks[TASK].store.get("k1") == "2|v3" and first.tasks[TASK].store.get("k2") == "1|v2"
    first.close()
    first_events.close()

    assert first.restored_offsets() == {}  # an empty changelog: nothing was restored
    second, second_events = instance("second")  # an empty state directory: it restores from the changelog
    try:
        opened = int(time.time() * 1000)
        second.reconcile(info, owned)
        send([("k2", "v4")])
        stepping_until(second, lambda: at(second) == 4, "the second instance to resume after the restored records")
        store = second.tasks[TASK].store
        assert (store.get("k1"), store.get("k2")) == ("2|v3", "3|v4")
        assert second.processed() == {"0_0": 1}  # only the new record: the restore said where to resume
        # What its state report says it restored: the three changelog records, in a restore begun when it took the task.
        restore = second.restored_offsets()[TASK]
        assert restore.offsets == 3 and opened <= restore.started_at <= int(time.time() * 1000)
    finally:
        second.close()
        second_events.close()


OWNED = frozenset({(INPUT, 0)})
ACTIVE = AssignmentInfo(active_tasks={TASK: ((INPUT, 0),)})


def test_a_released_task_is_not_restarted_by_a_snapshot_taken_before_the_release(
    broker: EmbeddedBroker, manager: TaskManager
) -> None:
    produce(broker.bootstrap, ["a"])
    stepping_until(manager, lambda: position(manager) == 1, "the task to process")
    # The listener gives the partition up (epoch 5) while the task loop still holds the snapshot of epoch 4.
    manager.release(OWNED, owned_epoch=5)
    assert not manager.tasks[TASK].processing
    manager.reconcile(ACTIVE, OWNED, owned_epoch=4)
    manager.step()
    assert not manager.tasks[TASK].processing
    manager.reconcile(ACTIVE, OWNED, owned_epoch=6)  # the group gave it back
    stepping_until(manager, lambda: manager.tasks[TASK].processing, "the task to process again")


def test_a_lost_active_task_closes_at_once_keeping_what_its_changelog_acknowledged(
    broker: EmbeddedBroker, manager: TaskManager, tmp_path: Path
) -> None:
    produce(broker.bootstrap, ["a", "b"])
    stepping_until(manager, lambda: position(manager) == 2, "two records committed")
    manager.lose(OWNED, owned_epoch=3)
    assert TASK not in manager.tasks
    stops = [e for e in read_events(tmp_path / "events.jsonl") if e["event"] == "stop"]
    assert [(e["task"], e["why"]) for e in stops] == [("0_0", "lost")]
    assert manager.offset_sums()[TASK] == 2  # the checkpoint of the two acknowledged writes, not -2
    manager.reconcile(ACTIVE, frozenset(), owned_epoch=3)  # the member rejoins owning nothing
    manager.step()
    assert not manager.tasks[TASK].processing
