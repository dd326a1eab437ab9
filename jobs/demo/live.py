"""The demo's live groups: Kafka Streams applications, the reference app's JVMs, behind the few questions the demo
asks of them. Three run the classic protocol with the plan-honoring plugin; one runs Kafka Streams' own protocol
(KIP-1071, ``group.protocol=streams``), assigned by the broker, where our broker-side assignor honors its plan.
(Python groups honor plans through the Python runtime; `rebalance-planner fleet` runs those.)"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from assignor.protocol.plans import ApprovedPlan
from assignor.protocol.restored_offsets import is_restored_key
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.local.streams_fleet import LIGHT, StreamsFleet, StreamsFleetConfig, at_target, processed_once
from jobs.settings import Settings

CLASSIC_GROUPS = ("orders", "payments", "clicks")
STREAMS_GROUP = "ledger"  # on the streams protocol: planned from the broker's description, steered by the broker
LIVE_GROUPS = (*CLASSIC_GROUPS, STREAMS_GROUP)
SCALED_OUT, NEWCOMER = "orders", "i4"
INSTANCES = ("i1", "i2", "i3")
STREAMS_INSTANCES = ("i1", "i2")  # two: the machine runs eleven JVMs besides the broker and Airflow
PARTITIONS = 6
# The reference app counts per input value, so its input gets distinct values (its produce mode): ~1,000
# changelog records per counting task, well beyond the demo's acceptable lag.
RECORDS = 1_000 * PARTITIONS
# A settled Kafka Streams group reads plans only when it rebalances: check often enough for the demo's pace.
PLAN_CHECK_INTERVAL_MS = 30_000


class AnnounceError(RuntimeError):
    """An instance about to join could not be announced on the reports topic."""


@dataclass
class LiveGroups:
    """Every live group's instances; started in :meth:`start`, stopped with the ExitStack passed to it."""

    settings: Settings
    root: Path
    fleets: dict[str, StreamsFleet] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return str(self.settings.kafka_bootstrap)

    def start(self, stack: ExitStack) -> None:
        """Per group: its input written, then its instances. A dozen JVMs share the machine with the broker, Airflow
        and the planner, so each runs with the light footprint (jobs.local.streams_fleet.LIGHT)."""
        s = self.settings
        for group in LIVE_GROUPS:
            streams = group == STREAMS_GROUP
            config = StreamsFleetConfig(
                self.bootstrap, self.root / group, group, PARTITIONS, s.plan_verify_keys, configs=s.kip441.configs(),
                reports_topic=s.reports_topic, plans_topic=s.plans_topic,
                plan_check_interval_ms=PLAN_CHECK_INTERVAL_MS, plugin=not streams,
                group_protocol="streams" if streams else "classic",
            )  # fmt: skip
            fleet = stack.enter_context(StreamsFleet(LIGHT.apply(config)))
            fleet.produce(RECORDS, keys=RECORDS)
            for name in STREAMS_INSTANCES if streams else INSTANCES:
                fleet.start(name)
            self.fleets[group] = fleet

    def processed_once(self) -> bool:
        """Every task of every live group processed by exactly one live instance."""
        return len(self.fleets) == len(LIVE_GROUPS) and all(processed_once(f) for f in self.fleets.values())

    def start_instance(self, group_id: str, name: str) -> None:
        self.fleets[group_id].start(name)

    def announce(self, group_id: str, name: str) -> str:
        """An empty report for an instance about to join, so tonight's plan already gives it its share."""
        template = self._template(group_id)
        try:
            return self.fleets[group_id].announce(name, template)
        except RuntimeError as err:
            raise AnnounceError(str(err)) from err

    def _template(self, group_id: str) -> dict[str, object]:
        reports = read_latest_by_key(self.bootstrap, self.settings.reports_topic)
        for key, value in reports.items():
            text = key.decode("utf-8", "replace")
            if value is not None and text.startswith(f"{group_id}/") and not is_restored_key(text):
                template: dict[str, object] = json.loads(value)
                return template
        raise AnnounceError(f"no report of {group_id} to announce a new instance with")

    def converged(self, group_id: str, plan: ApprovedPlan) -> bool:
        """Every live instance of the group holds and processes exactly its target tasks, nothing moving."""
        return at_target(self.fleets[group_id], plan.target)
