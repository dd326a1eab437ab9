"""The pipeline's reads of the broker besides the topics it folds: whether it answers, partition counts,
changelog end offsets, committed offsets and group membership, each retried while the broker says "not now".
Extract and observe share them."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AdminClient,
    ConsumerGroupDescription,
    OffsetSpec,
)

from jobs.pipeline.intake import BrokerGroup, BrokerMember
from jobs.pipeline.stage import BrokerUnreachable
from jobs.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")
_BROKER_PREFIX = re.compile(r"^\S+/\S+: ")
_CHUNK = 2_000
_DESCRIBE_CHUNK = 200


@dataclass(frozen=True)
class ConnectRetry:
    """How hard a stage tries to reach the broker before giving up: ``attempts`` tries of at most ``timeout_s``
    each, waiting ``backoff_s`` after the first failure and twice as long after each next (at most
    ``backoff_max_s``). Worst case: attempts × timeout_s plus the waits."""

    attempts: int
    backoff_s: float
    backoff_max_s: float
    timeout_s: float

    @staticmethod
    def from_settings(settings: Settings) -> ConnectRetry:
        return ConnectRetry(
            attempts=settings.kafka_connect_attempts,
            backoff_s=settings.kafka_retry_backoff_s,
            backoff_max_s=settings.kafka_retry_backoff_max_s,
            timeout_s=settings.kafka_timeout_s,
        )

    def delay(self, failed_attempts: int) -> float:
        """The wait after the ``failed_attempts``-th failure (1-based)."""
        return float(min(self.backoff_s * 2 ** (failed_attempts - 1), self.backoff_max_s))


def _probe(properties: Mapping[str, str], timeout_s: float) -> str | None:
    """None when a broker at the bootstrap answers a DescribeCluster within ``timeout_s``, else why not. Stops
    early once librdkafka finds every bootstrap broker down (a refused connection takes milliseconds)."""
    errors: list[KafkaError] = []
    config: dict[str, str | int | float | bool | Any] = {"log_level": 0, **properties, "error_cb": errors.append}
    admin = AdminClient(config)
    deadline = time.monotonic() + timeout_s
    future = admin.describe_cluster(request_timeout=timeout_s)
    while not future.done() and time.monotonic() < deadline:
        admin.poll(0.05)  # serves error_cb
        if any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors):
            break
    if future.done():
        try:
            future.result()
            return None
        except KafkaException as err:
            errors.append(err.args[0])
    specific = [e for e in errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
    if not errors:
        return f"no answer within {timeout_s:g} s"
    # librdkafka prefixes the broker's name ("127.0.0.1:9092/bootstrap: "); the message names the bootstrap already.
    return _BROKER_PREFIX.sub("", str((specific or errors)[-1].str()))


def await_broker(settings: Settings, bootstrap: str, retry: ConnectRetry | None = None) -> None:
    """Return once a broker at ``bootstrap`` answers; retry with exponential backoff, then BrokerUnreachable."""
    retry = retry or ConnectRetry.from_settings(settings)
    properties = settings.kafka_properties(bootstrap)
    started = time.monotonic()
    reason = "not tried"
    for attempt in range(1, retry.attempts + 1):
        failure = _probe(properties, retry.timeout_s)
        if failure is None:
            if attempt > 1:
                log.info("Kafka at %s answered at attempt %d of %d", bootstrap, attempt, retry.attempts)
            return
        reason = failure
        if attempt < retry.attempts:
            wait = retry.delay(attempt)
            log.warning(
                "Kafka at %s unreachable (attempt %d of %d): %s; retrying in %.1f s",
                *(bootstrap, attempt, retry.attempts, failure, wait),
            )
            time.sleep(wait)  # backoff between attempts, not a wait for another process's state
    raise BrokerUnreachable(bootstrap, retry.attempts, time.monotonic() - started, reason)


@dataclass(frozen=True)
class BrokerState:
    """What the broker says besides the reports: partition counts, end offsets, committed offsets, and the
    membership of the report groups it lists (None: not asked, e.g. a snapshot built without a broker)."""

    partitions: Mapping[str, int]
    end_offsets: Mapping[tuple[str, int], int]
    committed: Mapping[str, Mapping[tuple[str, int], int]]  # group -> (topic, partition) -> offset
    membership: Mapping[str, BrokerGroup] | None = None  # group -> members; groups the broker does not list absent


# Broker answers that mean "not now" (a coordinator still loading after a restart, a leader moving): ask again.
_TRANSIENT = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)


def _transient(error: Any) -> bool:
    return isinstance(error, KafkaError) and (error.retriable() or error.code() in _TRANSIENT)


def _retrying(call: Callable[[], T], what: str, retry: ConnectRetry) -> T:
    """``call()``, again after a backoff while the broker answers "not now"; its last error once retries run out."""
    for attempt in range(1, retry.attempts + 1):
        try:
            return call()
        except KafkaException as err:
            if attempt == retry.attempts or not _transient(err.args[0]):
                raise
            wait = retry.delay(attempt)
            log.warning(
                "%s: %s; retrying in %.1f s (attempt %d of %d)", what, err.args[0], wait, attempt, retry.attempts
            )
            time.sleep(wait)  # backoff between attempts
    raise AssertionError("unreachable: the last attempt returns or raises")


def _partition_counts(admin: AdminClient, topics: set[str], retry: ConnectRetry) -> dict[str, int]:
    metadata = _retrying(lambda: admin.list_topics(timeout=retry.timeout_s).topics, "topic metadata", retry)
    return {t: len(metadata[t].partitions) for t in topics if t in metadata and metadata[t].error is None}


def all_partition_counts(admin: AdminClient, retry: ConnectRetry) -> dict[str, int]:
    metadata = _retrying(lambda: admin.list_topics(timeout=retry.timeout_s).topics, "topic metadata", retry)
    return {t: len(m.partitions) for t, m in metadata.items() if m.error is None}


def end_offsets(
    admin: AdminClient, partitions: list[tuple[str, int]], retry: ConnectRetry
) -> dict[tuple[str, int], int]:
    ends: dict[tuple[str, int], int] = {}

    def chunk_ends(chunk: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        requests = {TopicPartition(t, p): latest for t, p in chunk}
        futures = admin.list_offsets(requests, request_timeout=retry.timeout_s)
        return {(tp.topic, tp.partition): int(future.result().offset) for tp, future in futures.items()}

    for start in range(0, len(partitions), _CHUNK):
        chunk = partitions[start : start + _CHUNK]
        ends.update(_retrying(partial(chunk_ends, chunk), "changelog end offsets", retry))
        log.info("changelog end offsets: %d of %d partitions", len(ends), len(partitions))
    return ends


def _listed_groups(admin: AdminClient, retry: ConnectRetry) -> set[str]:
    def listed() -> set[str]:
        listing = admin.list_consumer_groups(request_timeout=retry.timeout_s).result()
        for error in listing.errors:  # a broker that did not answer: its groups would be missing from the listing
            raise KafkaException(error)
        return {g.group_id for g in listing.valid}

    return _retrying(listed, "listing consumer groups", retry)


def _committed(admin: AdminClient, groups: list[str], retry: ConnectRetry) -> dict[str, dict[tuple[str, int], int]]:
    """Committed offsets of the given (listed) groups."""

    def offsets(group: str) -> dict[tuple[str, int], int]:
        request = [ConsumerGroupTopicPartitions(group)]
        (future,) = admin.list_consumer_group_offsets(request, request_timeout=retry.timeout_s).values()
        tps = future.result().topic_partitions or []
        return {(tp.topic, tp.partition): int(tp.offset) for tp in tps if tp.offset >= 0}

    return {g: _retrying(partial(offsets, g), f"committed offsets of {g}", retry) for g in groups}


def _name(value: Any) -> str:
    """An enum's name as Kafka's tools spell it (PREPARING_REBALANCE → PreparingRebalance), or the text."""
    name = getattr(value, "name", None)
    return name.title().replace("_", "") if isinstance(name, str) else str(value or "")


def broker_group(description: ConsumerGroupDescription) -> BrokerGroup:
    """The members of a described group, their client, host and assigned partitions."""
    members = []
    for m in description.members:
        partitions = (m.assignment.topic_partitions if m.assignment is not None else None) or []
        assigned = tuple(sorted(f"{tp.topic}-{tp.partition}" for tp in partitions))
        members.append(BrokerMember(m.member_id, m.client_id or "", m.host or "", m.group_instance_id, assigned))
    node = description.coordinator
    coordinator = f"{node.host}:{node.port} (id {node.id})" if node is not None else ""
    return BrokerGroup(
        group_id=description.group_id,
        state=_name(description.state),
        group_type=_name(getattr(description, "type", None)),
        partition_assignor=description.partition_assignor or "",
        coordinator=coordinator,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
    )


def _membership(admin: AdminClient, groups: list[str], retry: ConnectRetry) -> dict[str, BrokerGroup]:
    """The described groups. Groups the broker answers "not now" for are asked again after a backoff; a group it
    will not describe (e.g. GROUP_AUTHORIZATION_FAILED) carries the error instead of members."""
    described: dict[str, BrokerGroup] = {}
    pending = list(groups)
    for attempt in range(1, retry.attempts + 1):
        again: dict[str, KafkaError] = {}
        for start in range(0, len(pending), _DESCRIBE_CHUNK):
            chunk = pending[start : start + _DESCRIBE_CHUNK]
            for group_id, future in admin.describe_consumer_groups(chunk, request_timeout=retry.timeout_s).items():
                try:
                    described[group_id] = broker_group(future.result())
                except KafkaException as err:
                    error = err.args[0]
                    if _transient(error) and attempt < retry.attempts:
                        again[group_id] = error
                    else:
                        described[group_id] = BrokerGroup(group_id, "", "", "", "", error=str(error.str()))
        if not again:
            break
        wait = retry.delay(attempt)
        log.warning("describing %d group(s): %s; retrying in %.1f s", len(again), next(iter(again.values())), wait)
        time.sleep(wait)  # backoff between attempts
        pending = sorted(again)
    return described


def read_broker_state(settings: Settings, bootstrap: str, intake_topics: set[str], groups: set[str]) -> BrokerState:
    """Partition counts of the named topics; of the named groups the broker lists, their members (with client,
    host and assignment) and committed offsets. End offsets come later, once the tasks are known."""
    admin = admin_client(settings, bootstrap)
    retry = ConnectRetry.from_settings(settings)
    partitions = _partition_counts(admin, intake_topics, retry)
    listed = sorted(_listed_groups(admin, retry) & groups)
    membership = _membership(admin, listed, retry)
    committed = _committed(admin, listed, retry)
    members = sum(len(g.members) for g in membership.values())
    log.info("broker lists %d of %d report groups, %d members", len(listed), len(groups), members)
    return BrokerState(partitions, {}, committed, membership)


def read_membership(settings: Settings, bootstrap: str, groups: set[str]) -> dict[str, BrokerGroup]:
    """The members the broker lists for each of ``groups``; a group the broker does not list is absent."""
    admin = admin_client(settings, bootstrap)
    retry = ConnectRetry.from_settings(settings)
    return _membership(admin, sorted(_listed_groups(admin, retry) & groups), retry)


def admin_client(settings: Settings, bootstrap: str) -> AdminClient:
    config: dict[str, str | int | float | bool] = {**settings.kafka_properties(bootstrap)}
    return AdminClient(config)
