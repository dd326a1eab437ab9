"""Group membership through kafka-python 3.0.12, with the places where it would get stuck or give up handled.

1. A leader's first assignment is wasted when the consumer's metadata does not yet list the subscribed
   topics (the leader sees no partitions, assigns none, then rejoins once the metadata arrives): load it
   before subscribing.
2. ``poll()`` only drives a join that is in flight while ``need_rejoin()`` holds. A leader rejoining
   because its metadata changed (not because it was asked to) stops needing to rejoin as soon as it has
   computed the assignment; if the poll's timer ran out before SyncGroup answered, no later poll waits
   for the answer. The member then stays "rebalancing" with heartbeats disabled, and the coordinator
   removes it when its session times out. A poll that leaves such a stranded join asks to rejoin, so the
   next poll awaits the same join (kafka-python re-awaits a join that is still in flight).
3. ``poll()`` raises the error that ended the heartbeat loop (a refused connection while the broker is
   down) and restarts the loop on the next call: such errors are retried, not fatal.

The second uses kafka-python internals (``_coordinator``): it has no public call for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import RetriableError

log = logging.getLogger(__name__)


def subscribe_once_known(
    consumer: KafkaConsumer, topics: Sequence[str], listener: ConsumerRebalanceListener | None = None
) -> None:
    """Subscribe once the consumer knows the topics' partitions (a leader then assigns them at once)."""
    for topic in topics:
        consumer.partitions_for_topic(topic)
    consumer.subscribe(list(topics), listener=listener)


def poll_membership(consumer: KafkaConsumer, timeout_ms: int) -> bool:
    """One membership poll (records are not wanted: the caller's partitions stay paused or are ignored); False
    when it met an error kafka-python recovers from by being polled again (the broker unreachable, say): the
    caller backs off and polls on. The group keeps the member for its session timeout meanwhile."""
    try:
        consumer.poll(timeout_ms=timeout_ms)
    except RetriableError as err:  # e.g. the heartbeat loop ended on a refused connection; the next poll restarts it
        log.warning("group membership: %s; polling again", err)
        return False
    coordinator = consumer._coordinator
    if coordinator.rebalance_in_progress() and not coordinator.need_rejoin():
        coordinator.request_rejoin()  # a join whose SyncGroup answer no poll would wait for: wait for it next time
    return True
