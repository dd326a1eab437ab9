"""A minimal stateful task runtime: what an instance does with the tasks its assignment names.

An active task restores its store to the changelog's end, then hands batches of its input to the
application's processor (assignor.runtime.processors) and writes the updates it returns to its changelog;
the store applies them, and the input position advances, only once the changelog holds them. Standby and
warmup tasks consume the changelog into their stores. Offset sums for the subscription come from the
checkpoints, -2 for a processing active.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from assignor.protocol.restored_offsets import TaskRestore
from assignor.runtime.deliveries import BatchDeliveries
from assignor.runtime.events import EventLog
from assignor.runtime.group_assignor import Topology
from assignor.runtime.processors import CountPerKey, InputRecord, TaskProcessor
from assignor.runtime.protocol import AssignmentInfo, Partition
from assignor.runtime.state_dir import StateDirectory
from assignor.runtime.store import ChangelogRecord, TaskStore
from assignor.task import LATEST_OFFSET, TaskId

log = logging.getLogger(__name__)
_RESTORE_BATCH = 5_000
_PROCESS_BATCH = 500
_PROGRESS_EVERY_S = 1.0
# A changelog write the broker refused (a record over the topic's max.message.bytes, an authorization error)
# is usually refused again: the task waits before reprocessing, up to half a minute, instead of spinning.
_RETRY_FIRST_S = 1.0
_RETRY_MAX_S = 30.0


@dataclass
class _Task:
    """A task this instance holds now."""

    id: TaskId
    role: str  # "active", "standby" or "warmup"
    store: TaskStore
    changelogs: tuple[Partition, ...]
    inputs: tuple[Partition, ...]
    processing: bool = False
    restore_to: dict[Partition, int] | None = None  # an active restoring before it may process
    restored: int = 0  # changelog records applied since this instance took the task
    opened_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))  # when its restore began
    processed: int = 0
    started_at: float = field(default_factory=time.monotonic)
    failed_batches: int = 0  # consecutive batches with a changelog write the broker did not take
    retry_at: float | None = None  # input paused until then after a failed write (monotonic seconds)

    def lag(self, ends: Mapping[Partition, int]) -> int:
        return sum(max(0, ends.get(p, 0) - self.store.positions.get(p, 0)) for p in self.changelogs)


def helper_group(group_id: str, role: str, process_id: str) -> str:
    """The consumer group id of an instance's restore or input consumer: under its application's group id."""
    return f"{group_id}-rbp-{role}-{process_id}"


class TaskManager:
    """Opens, restores, processes and closes an instance's tasks as assignments change."""

    def __init__(
        self,
        state: StateDirectory,
        topology: Topology,
        kafka: Mapping[str, str],
        events: EventLog,
        processor: TaskProcessor | None = None,
        *,
        group_id: str,
    ) -> None:
        self.state, self.topology, self.events = state, topology, events
        self.processor: TaskProcessor = processor or CountPerKey()
        base = {"enable.auto.commit": False, "auto.offset.reset": "earliest", **kafka}
        # librdkafka looks up a coordinator for any group.id, even with assign(): named under the application's own
        # group so the ACLs that give an application its groups by prefix cover them (a denied lookup is retried
        # every second for the instance's life).
        self._restore = Consumer({**base, "group.id": helper_group(group_id, "restore", state.process_id)})
        self._input = Consumer({**base, "group.id": helper_group(group_id, "input", state.process_id)})
        # Idempotent: a batch retried after a lost connection or a broker restart is neither duplicated nor
        # reordered, so a key's newest changelog record is always its newest count.
        self._producer = Producer({**kafka, "enable.idempotence": True})
        self.tasks: dict[TaskId, _Task] = {}
        self._by_changelog: dict[Partition, _Task] = {}  # per record on the hot path: a lookup, not a scan
        self._by_input: dict[Partition, _Task] = {}
        self._closed_sums: dict[TaskId, int] = {}
        # Each task's latest restore, kept after the task closes: observe sums those begun after a plan's publish.
        self._restores: dict[TaskId, TaskRestore] = {}
        for task in state.local_tasks():
            self._remember_closed(task)
        self._restore_assigned: set[Partition] = set()
        self._unactivated: set[TaskId] = set()  # owned actives whose changelog ends could not be read yet
        self._closed = False
        self._owned_epoch = 0  # of the latest release or loss (MemberView.owned_epoch)
        self._input_assigned: set[Partition] = set()
        self._last_progress = time.monotonic()
        self._lock = threading.RLock()  # the membership thread reads offset sums while this one works

    # -- assignment --------------------------------------------------------------------------------

    def reconcile(
        self, info: AssignmentInfo | None, owned_inputs: frozenset[Partition], owned_epoch: int | None = None
    ) -> None:
        """Bring the running tasks in line with the assignment and the input partitions owned now. A snapshot
        older (``owned_epoch``) than the latest release or loss is ignored: it would restart what was given up."""
        with self._lock:
            if owned_epoch is not None and owned_epoch < self._owned_epoch:
                return
            self._reconcile(info, owned_inputs)

    def _reconcile(self, info: AssignmentInfo | None, owned_inputs: frozenset[Partition]) -> None:
        wanted: dict[TaskId, str] = {}
        if info is not None:
            wanted.update(dict.fromkeys(info.standby_tasks, "standby"))
            wanted.update(dict.fromkeys(info.warmup_tasks, "warmup"))
            wanted.update(dict.fromkeys(info.active_tasks, "active"))
        for task_id in sorted(set(self.tasks) - set(wanted)):
            self._close(task_id)
        for task_id, role in sorted(wanted.items()):
            task = self.tasks.get(task_id) or self._open(task_id, role)
            if task.role != role:
                self.events.emit("role", task=str(task_id), old=task.role, new=role)
                task.role = role
            owns = role == "active" and bool(task.inputs) and set(task.inputs) <= owned_inputs
            if owns:
                if not task.processing and task.restore_to is None:
                    self._activate(task)
                continue
            if task.processing:
                self._stop_processing(task, "revoked" if role == "active" else f"now {role}")
            task.restore_to = None  # restore continues as a replica; activation checks the lag again
            self._unactivated.discard(task_id)
        self._assign_consumers()

    def release(self, inputs: frozenset[Partition], owned_epoch: int | None = None) -> None:
        """Stop processing, now, every task that reads one of these input partitions: a member gives them up
        before it rejoins (KIP-429), so their next owner never processes them at the same time."""
        with self._lock:
            self._owned_epoch = max(self._owned_epoch, owned_epoch or 0)
            if self._closed:
                return  # closing the group consumer revokes everything, after the tasks were closed
            for task in self.tasks.values():
                if not inputs.intersection(task.inputs):
                    continue
                if task.processing:
                    self._stop_processing(task, "revoked")
                task.restore_to = None  # an active about to start does not; reconcile decides again
                self._unactivated.discard(task.id)
            self._assign_consumers()

    def lose(self, inputs: frozenset[Partition], owned_epoch: int | None = None) -> None:
        """The group dropped this member (KIP-429 "lost"): every active task on these inputs closes at once, dirty,
        since another member may be processing it already: nothing more is flushed or written for it. Its store
        keeps only what its changelog acknowledged (each batch commits whole), so a later restore resumes there."""
        with self._lock:
            self._owned_epoch = max(self._owned_epoch, owned_epoch or 0)
            if self._closed:
                return
            for task in [t for t in self.tasks.values() if t.role == "active" and inputs.intersection(t.inputs)]:
                if task.processing:
                    task.processing = False
                    self.events.emit("stop", task=str(task.id), why="lost", processed=task.processed)
                self._close(task.id)
            self._assign_consumers()

    def restored_offsets(self) -> dict[TaskId, TaskRestore]:
        """Per task, its latest restore on this instance since it started (the state report's restored_offsets)."""
        with self._lock:
            return dict(self._restores)

    def _open(self, task_id: TaskId, role: str) -> _Task:
        task = _Task(
            id=task_id,
            role=role,
            store=TaskStore(self.state.task_dir(task_id)),
            changelogs=self.topology.changelog_partitions(task_id),
            inputs=self.topology.source_partitions(task_id),
        )
        self._closed_sums.pop(task_id, None)
        self.tasks[task_id] = task
        self._by_changelog.update(dict.fromkeys(task.changelogs, task))
        self._by_input.update(dict.fromkeys(task.inputs, task))
        self.events.emit("open", task=str(task_id), role=role, offset_sum=task.store.offset_sum(task.changelogs))
        return task

    def _close(self, task_id: TaskId) -> None:
        task = self.tasks.pop(task_id)
        self._unactivated.discard(task_id)
        for partition in task.changelogs:
            self._by_changelog.pop(partition, None)
        for partition in task.inputs:
            self._by_input.pop(partition, None)
        if task.processing:
            self._stop_processing(task, "unassigned")
        task.store.close()
        self._remember_closed(task_id)
        self.events.emit("close", task=str(task_id), role=task.role, restored=task.restored)

    def _remember_closed(self, task_id: TaskId) -> None:
        try:
            changelogs = self.topology.changelog_partitions(task_id)
        except KeyError:
            return  # state of a task this topology no longer has
        if changelogs:
            checkpoints = self.state.checkpoints(task_id)
            self._closed_sums[task_id] = sum(checkpoints.get(p, 0) for p in changelogs)

    def _activate(self, task: _Task) -> None:
        """The task's input is ours: restore to the changelog's end first (the lag here is what KIP-441 bounds)."""
        try:
            ends = self._end_offsets(task.changelogs)
        except KafkaException as err:  # a broker restarting, a partition leader moving: try again next step
            if task.id not in self._unactivated:
                log.warning("task %s: changelog end offsets not readable yet: %s", task.id, err)
            self._unactivated.add(task.id)
            return
        self._unactivated.discard(task.id)
        lag = task.lag(ends)
        self.events.emit("activate", task=str(task.id), lag=lag, offset_sum=task.store.offset_sum(task.changelogs))
        task.restore_to = ends
        self._maybe_start_processing(task)

    def _maybe_start_processing(self, task: _Task) -> bool:
        """Start processing once restored to the end seen at activation; whether it started now."""
        if task.restore_to is None or task.lag(task.restore_to) > 0:
            return False
        task.restore_to = None
        task.processing = True
        self.events.emit("processing", task=str(task.id), restored=task.restored)
        return True

    def _stop_processing(self, task: _Task, why: str) -> None:
        self._flush()
        task.processing = False
        task.retry_at, task.failed_batches = None, 0
        self.events.emit("stop", task=str(task.id), why=why, processed=task.processed)

    def _assign_consumers(self) -> None:
        restoring = {p for t in self.tasks.values() if not t.processing for p in t.changelogs}
        if restoring != self._restore_assigned:
            self._restore.assign([TopicPartition(tp, p, self._position(tp, p)) for tp, p in sorted(restoring)] or [])
            self._restore_assigned = restoring
        # A task waiting to retry a failed write leaves the input consumer; on its return the consumer starts
        # from the stored position, which is before the records whose writes failed.
        processing = {p for t in self.tasks.values() if t.processing and t.retry_at is None for p in t.inputs}
        if processing != self._input_assigned:
            self._input.assign([TopicPartition(tp, p, self._input_position(tp, p)) for tp, p in sorted(processing)])
            self._input_assigned = processing

    def _owner(self, partition: Partition, changelog: bool) -> _Task | None:
        return (self._by_changelog if changelog else self._by_input).get(partition)

    def _position(self, topic: str, partition: int) -> int:
        task = self._owner((topic, partition), changelog=True)
        return task.store.positions.get((topic, partition), 0) if task else 0

    def _input_position(self, topic: str, partition: int) -> int:
        task = self._owner((topic, partition), changelog=False)
        position = task.store.input_position((topic, partition)) if task else None
        return 0 if position is None else position

    def _end_offsets(self, partitions: tuple[Partition, ...]) -> dict[Partition, int]:
        ends = {}
        for topic, partition in partitions:
            _, high = self._restore.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            ends[(topic, partition)] = int(high)
        return ends

    # -- work --------------------------------------------------------------------------------------

    def step(self) -> int:
        """Restore a batch, process a batch; the number of records handled."""
        with self._lock:
            if self._unactivated:
                for task_id in sorted(self._unactivated):
                    self._activate(self.tasks[task_id])  # still owned: reconcile and release drop it otherwise
                self._assign_consumers()
            now = time.monotonic()
            retrying = [t for t in self.tasks.values() if t.retry_at is not None and t.retry_at <= now]
            if retrying:
                for task in retrying:
                    task.retry_at = None
                self._assign_consumers()
            handled = self._restore_batch() + self._process_batch()
        if time.monotonic() - self._last_progress >= _PROGRESS_EVERY_S:
            self._last_progress = time.monotonic()
            self._log_progress()
        return handled

    def _restore_batch(self) -> int:
        if not self._restore_assigned:
            return 0
        messages = self._restore.consume(_RESTORE_BATCH, timeout=0.02)
        by_task: dict[TaskId, list[ChangelogRecord]] = defaultdict(list)
        for message in _good(messages):
            partition = (str(message.topic()), int(message.partition() or 0))
            task = self._owner(partition, changelog=True)
            if task is None or task.processing:
                continue
            offset = int(message.offset() or 0)
            by_task[task.id].append((partition, offset, _text(message.key()), _text(message.value())))
        started = False
        for task_id, records in by_task.items():
            task = self.tasks[task_id]
            task.restored += task.store.apply(records, _input_positions(records, task, self.processor))
            self._restores[task_id] = TaskRestore(task.restored, task.opened_at_ms)
            started |= self._maybe_start_processing(task)
        if started:  # its changelog leaves the restore consumer, its input joins the input consumer
            self._assign_consumers()
        return sum(len(r) for r in by_task.values())

    def _process_batch(self) -> int:
        if not self._input_assigned:
            return 0
        messages = self._input.consume(_PROCESS_BATCH, timeout=0.02)
        batches: dict[TaskId, list[InputRecord]] = defaultdict(list)
        for message in _good(messages):
            partition = (str(message.topic()), int(message.partition() or 0))
            task = self._owner(partition, changelog=False)
            if task is None or not task.processing or task.retry_at is not None or not task.changelogs:
                continue
            offset = int(message.offset() or 0)
            batches[task.id].append(InputRecord(partition, offset, _text(message.key()), _text(message.value())))
        if not batches:
            return 0
        deliveries = {}
        for task_id, records in batches.items():
            task = self.tasks[task_id]
            writes = self.processor.process(task_id, records, task.store)
            deliveries[task_id] = BatchDeliveries(records, writes)
            changelog, changelog_partition = task.changelogs[0]
            for index, write in enumerate(writes):
                on_delivery = partial(deliveries[task_id].delivered, index)
                self._producer.produce(
                    changelog, key=write.key, value=write.value, partition=changelog_partition, on_delivery=on_delivery
                )
        self._flush()
        failed = False
        committed = 0
        for task_id, delivered in deliveries.items():
            task = self.tasks[task_id]
            applied, inputs = delivered.committed()
            task.store.apply(applied, inputs)
            done = sum(1 for r in delivered.records if inputs.get(r.partition, 0) > r.offset)
            task.processed += done
            committed += len(applied)
            if delivered.failure is not None:
                self._hold_back(task, delivered, done)
                failed = True
            else:
                task.failed_batches = 0
        if failed:
            self._assign_consumers()
        return committed

    def _hold_back(self, task: _Task, delivered: BatchDeliveries, done: int) -> None:
        """A write failed: the input position stays before its record, and the task retries after a pause."""
        failure = delivered.failure
        assert failure is not None
        write, error = failure
        task.failed_batches += 1
        wait_s = min(_RETRY_MAX_S, _RETRY_FIRST_S * 2 ** (task.failed_batches - 1))
        task.retry_at = time.monotonic() + wait_s
        log.warning(
            "task %s: changelog write for input %s[%d]@%d failed (%s); its input resumes there in %.0f s",
            task.id,
            *write.source.partition,
            write.source.offset,
            error,
            wait_s,
        )
        self.events.emit(
            "delivery_failed",
            task=str(task.id),
            input=f"{write.source.partition[0]}-{write.source.partition[1]}",
            input_offset=write.source.offset,
            error=error,
            failed_writes=delivered.failed_count,
            committed_records=done,
            retry_in_s=wait_s,
        )

    def _flush(self) -> None:
        """Wait for the delivery report of every changelog write, so the store applies what the changelog holds.

        librdkafka retries a write through a lost connection or a broker restart and fails it only after
        ``message.timeout.ms`` (5 minutes by default); a failed write is not applied, nor anything after it."""
        if self._producer.flush(10) == 0:
            return
        log.warning("changelog writes unacknowledged for 10 s; waiting for the broker")
        while self._producer.flush(1.0) > 0:
            continue

    def _log_progress(self) -> None:
        processing = {str(t.id): t.processed for t in self.tasks.values() if t.processing}
        if processing:
            self.events.emit("processed", tasks=processing)
        restoring = [t for t in self.tasks.values() if not t.processing and t.changelogs]
        if not restoring:
            return
        ends = self._cached_ends([p for t in restoring for p in t.changelogs])
        self.events.emit(
            "progress",
            restoring={str(t.id): {"role": t.role, "restored": t.restored, "lag": t.lag(ends)} for t in restoring},
        )

    def _cached_ends(self, partitions: list[Partition]) -> dict[Partition, int]:
        ends = {}
        for topic, partition in partitions:
            _, high = self._restore.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            ends[(topic, partition)] = max(int(high), 0)
        return ends

    # -- reporting ---------------------------------------------------------------------------------

    def offset_sums(self) -> dict[TaskId, int]:
        """Per task with local state: -2 when processing as an active, else its checkpointed offset sum."""
        with self._lock:
            sums = dict(self._closed_sums)
            for task in self.tasks.values():
                if task.changelogs:
                    sums[task.id] = LATEST_OFFSET if task.processing else task.store.offset_sum(task.changelogs)
            return sums

    def processed(self) -> dict[str, int]:
        """Input records each task held now has processed since this instance took it."""
        with self._lock:
            return {str(t.id): t.processed for t in self.tasks.values()}

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return self._summary()

    def _summary(self) -> dict[str, Any]:
        return {
            str(t.id): {"role": t.role, "processing": t.processing, "restored": t.restored, "processed": t.processed}
            for t in sorted(self.tasks.values(), key=lambda t: t.id)
        }

    def close(self) -> None:
        with self._lock:
            for task_id in sorted(self.tasks):
                self._close(task_id)
            self._closed = True
        self._producer.flush(10)
        self._restore.close()
        self._input.close()


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def _good(messages: list[Message]) -> list[Message]:
    good = []
    for message in messages:
        error = message.error()
        if error is None:
            good.append(message)
        elif error.fatal():
            raise RuntimeError(f"reading {message.topic()}[{message.partition()}] failed: {error}")
        elif error.code() != KafkaError._PARTITION_EOF:
            # librdkafka recovers from every other error itself (a broker down, a leader moving): informational
            log.warning("reading %s[%s]: %s", message.topic(), message.partition(), error)
    return good


def _input_positions(records: list[ChangelogRecord], task: _Task, processor: TaskProcessor) -> dict[Partition, int]:
    """The input position a restored store resumes from: the input offset of its newest changelog record.

    Only one active writes a changelog at a time and each resumes where the last stopped, so input offsets
    rise along the changelog: the newest readable record decides, and a restore parses one value per batch.
    """
    if not task.inputs:
        return {}
    for _, _, _, value in reversed(records):
        newest = processor.resume_offset(value)
        if newest is None:
            continue
        return {task.inputs[0]: newest + 1} if newest >= 0 else {}
    return {}
