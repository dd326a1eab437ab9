"""Reading Kafka Streams groups from the broker's group metadata (DescribeGroups), members' user data included.

confluent-kafka's admin client does not return members' subscription bytes; kafka-python's does, but turns them
into JSON-friendly text, which loses bytes: this reader keeps the response's raw member metadata and decodes the
consumer protocol envelope itself. Only classic groups have this metadata: a group on Kafka's new "streams"
group protocol (KIP-1071) keeps its topology and assignment on the broker instead and is not read here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import KafkaError as PyKafkaError
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from assignor.runtime.kafka_io import kafka_python_security
from jobs.pipeline.streams_groups import STREAMS_PROTOCOL, StreamsMember

log = logging.getLogger(__name__)
_DESCRIBE_CHUNK = 200


class _RawAdmin(KafkaAdminClient):  # type: ignore[misc]  # kafka-python ships no types for it
    """kafka-python's admin client answering describe_groups with the raw response groups (member bytes intact)."""

    def _describe_groups_process_response(self, response: Any) -> dict[str, Any]:
        return {group.group_id: group for group in response.groups}


@dataclass(frozen=True)
class StreamsGroupListing:
    """The classic ``stream``-protocol groups the broker describes, their members, and groups passed over (why)."""

    groups: Mapping[str, tuple[StreamsMember, ...]]
    passed_over: Mapping[str, str]


def _envelope(group_id: str, member: Any) -> StreamsMember:
    """The member with its consumer protocol subscription and assignment unwrapped; ``error`` when they do not
    decode. kafka-python's decoders raise more than one kind of error on bad bytes, hence the broad catch."""
    common = (group_id, member.member_id, member.client_id or "", member.client_host or "")
    try:
        subscription = ConsumerProtocolSubscription.decode(bytes(member.member_metadata or b""))
        assignment_bytes = bytes(member.member_assignment or b"")
        assigned: tuple[tuple[str, int], ...] = ()
        assignment_user_data = b""
        if assignment_bytes:
            assignment = ConsumerProtocolAssignment.decode(assignment_bytes)
            assigned = tuple((tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions)
            assignment_user_data = bytes(assignment.user_data or b"")
        generation = getattr(subscription, "generation_id", None)
        return StreamsMember(
            *common,
            subscription_user_data=bytes(subscription.user_data or b""),
            assignment_user_data=assignment_user_data,
            assigned=assigned,
            generation=int(generation) if isinstance(generation, int) else -1,
        )
    except Exception as err:  # see the docstring: any failure of the envelope's decoder is this member's
        reason = f"consumer protocol envelope does not decode: {type(err).__name__}: {err}"
        return StreamsMember(*common, b"", b"", (), -1, error=reason)


def with_retries(call: Any, what: str, attempts: int, backoff_s: float) -> Any:
    """``call()``, again after ``backoff_s`` while kafka-python says the error is retriable (a coordinator loading)."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except PyKafkaError as err:
            if attempt == attempts or not getattr(err, "retriable", False):
                raise
            log.warning("%s: %s; retrying in %.1f s (attempt %d of %d)", what, err, backoff_s, attempt, attempts)
            time.sleep(backoff_s)  # backoff between attempts (a coordinator still loading, say)
    raise AssertionError("unreachable")


def read_streams_groups(
    bootstrap: str,
    properties: Mapping[str, str],
    exclude: Iterable[str],
    timeout_s: float,
    attempts: int = 5,
    backoff_s: float = 1.0,
) -> StreamsGroupListing:
    """List the broker's groups and describe the classic consumer groups not in ``exclude`` (groups read from
    their own reports); keep those whose assignor protocol is Kafka Streams'."""
    admin = _RawAdmin(
        bootstrap_servers=bootstrap,
        request_timeout_ms=int(timeout_s * 1000),
        client_id="rebalance-planner-extract",
        **kafka_python_security(properties),
    )
    try:
        listed = with_retries(admin.list_groups, "listing groups", attempts, backoff_s)
        skip = set(exclude)
        passed_over: dict[str, str] = {}
        candidates = []
        for g in listed:
            group_id, kind = g["group_id"], (g.get("group_type") or "classic").lower()
            if group_id in skip:
                continue
            if kind == "streams":
                passed_over[group_id] = "a streams-protocol group (KIP-1071): its members carry no user data"
            elif kind == "classic" and g.get("protocol_type") == "consumer":
                candidates.append(group_id)
        groups: dict[str, tuple[StreamsMember, ...]] = {}
        for start in range(0, len(candidates), _DESCRIBE_CHUNK):
            chunk = candidates[start : start + _DESCRIBE_CHUNK]
            described = with_retries(partial(admin.describe_groups, chunk), "describing groups", attempts, backoff_s)
            for group_id, group in sorted(described.items()):
                if group.error_code:
                    passed_over[group_id] = f"the broker did not describe it (error code {group.error_code})"
                elif group.protocol_data == STREAMS_PROTOCOL:
                    groups[group_id] = tuple(_envelope(group_id, m) for m in group.members)
        log.info(
            "group metadata: %d Kafka Streams group(s) without reports, %d member(s); %d passed over",
            len(groups),
            sum(len(m) for m in groups.values()),
            len(passed_over),
        )
        return StreamsGroupListing(groups, passed_over)
    finally:
        admin.close()
