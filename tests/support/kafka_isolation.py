"""One Apache Kafka broker per test session; each test (or module) leaves it as it found it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from jobs.local.broker import EmbeddedBroker
from jobs.polling import wait_until

# A member killed without leaving stays in its group for its session timeout (tests use <= 6 s).
GROUP_EMPTY_DEADLINE_S = 20.0


def _topics(admin: AdminClient) -> set[str]:
    return {name for name in admin.list_topics(timeout=10).topics if not name.startswith("__")}


def _groups(admin: AdminClient) -> set[str]:
    listed = admin.list_consumer_groups(request_timeout=10).result()
    return {group.group_id for group in listed.valid}


def delete_streams_group(admin: AdminClient, group: str) -> None:
    """Remove a streams-protocol group (which isolation's ListGroups of consumer groups does not see) once its
    members have left; DeleteGroups serves every group type."""

    def deleted() -> bool:
        try:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result()
        except KafkaException as err:
            return bool(err.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND)
        return True

    wait_until(deleted, 60, f"streams group {group} deleted", poll_s=1)


def _delete_groups(admin: AdminClient, groups: set[str]) -> None:
    """Delete groups, retrying those that still have members until their sessions expire."""
    deadline = time.monotonic() + GROUP_EMPTY_DEADLINE_S
    pending = set(groups)
    while pending and time.monotonic() < deadline:
        for group, future in admin.delete_consumer_groups(sorted(pending), request_timeout=10).items():
            try:
                future.result()
                pending.discard(group)
            except KafkaException as err:
                if err.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:  # already gone
                    pending.discard(group)
        if pending:
            time.sleep(0.5)  # members of a killed process leave when their session times out; poll until then


def _delete_topics(admin: AdminClient, topics: set[str]) -> None:
    if not topics:
        return
    for future in admin.delete_topics(sorted(topics), operation_timeout=30).values():
        with contextlib.suppress(KafkaException):  # already gone
            future.result()
    deadline = time.monotonic() + 30
    while _still_exist(admin, topics) and time.monotonic() < deadline:
        time.sleep(0.2)  # the controller finishes deleting after it answered; poll until the names are free


def _still_exist(admin: AdminClient, topics: set[str]) -> bool:
    """Whether creating any of `topics` would still fail (a validate-only request: nothing is created)."""
    futures = admin.create_topics([NewTopic(t, 1, 1) for t in sorted(topics)], validate_only=True)
    for future in futures.values():
        try:
            future.result()
        except KafkaException as err:
            if err.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return True
    return False


@contextmanager
def isolated(broker: EmbeddedBroker) -> Iterator[EmbeddedBroker]:
    """The shared broker; afterwards the topics and consumer groups created meanwhile are deleted."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics_before, groups_before = _topics(admin), _groups(admin)
    try:
        yield broker
    finally:
        if broker.running:
            _delete_groups(admin, _groups(admin) - groups_before)
            _delete_topics(admin, _topics(admin) - topics_before)
