"""The demo's live groups: a Kafka Streams application (the reference app's JVMs with the plan-honoring plugin) and
Python groups (the runtime, the binding for Python consumers), behind the few questions the demo asks of them."""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer

from assignor.protocol.plans import ApprovedPlan
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.local.fleet import Fleet, FleetConfig, InputLoad
from jobs.local.fleet_events import all_tasks_processed_once, converged
from jobs.local.streams_fleet import StreamsFleet, StreamsFleetConfig, at_target, processed_once
from jobs.settings import Settings

# One JVM per Kafka Streams instance: a second such group (three more JVMs) overloads a two-core machine running
# Airflow and the planner beside it, so the other groups are the Python runtime's.
STREAMS_GROUPS = ("orders",)  # reference-app JVMs with the plugin
PYTHON_GROUPS = ("payments", "clicks")  # the Python runtime
LIVE_GROUPS = (*STREAMS_GROUPS, *PYTHON_GROUPS)
SCALED_OUT, NEWCOMER = "orders", "i4"
INSTANCES = ("i1", "i2", "i3")
PARTITIONS = 6
PYTHON_TASKS = {f"0_{p}" for p in range(PARTITIONS)}
# The reference app counts per input value, so its input gets distinct values (its produce mode) rather than the
# Python groups' steady load of one value: ~1,000 changelog records per counting task, well beyond the lag.
STREAMS_RECORDS = 1_000 * PARTITIONS
# A settled Kafka Streams group reads plans only when it rebalances: check often enough for the demo's pace.
PLAN_CHECK_INTERVAL_MS = 30_000


class AnnounceError(RuntimeError):
    """An instance about to join could not be announced on the reports topic."""


def binding(group_id: str) -> str:
    """How a live group runs: ``kafka-streams`` or ``python``."""
    return "kafka-streams" if group_id in STREAMS_GROUPS else "python"


@dataclass
class LiveGroups:
    """Every live group's instances; started in :meth:`start`, stopped with the ExitStack passed to it."""

    settings: Settings
    root: Path
    python: Fleet | None = None
    streams: dict[str, StreamsFleet] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return str(self.settings.kafka_bootstrap)

    def start(self, stack: ExitStack) -> None:
        """Three instances per group; input for the Kafka Streams groups, a steady load for the Python ones."""
        s = self.settings
        self.python = stack.enter_context(
            Fleet(FleetConfig(self.bootstrap, self.root / "python", s.plan_verify_keys, configs=s.kip441.configs(),
                              partitions=PARTITIONS, report_interval_s=2.0))
        )  # fmt: skip
        sources = [t for g in PYTHON_GROUPS for t in self.python.create_group(g).source_topics]
        for group in PYTHON_GROUPS:
            for name in INSTANCES:
                self.python.start(group, name)
        stack.enter_context(InputLoad(self.bootstrap, sources, rate_per_s=100.0 * len(PYTHON_GROUPS)))
        for group in STREAMS_GROUPS:
            config = StreamsFleetConfig(
                self.bootstrap, self.root / group, group, PARTITIONS, s.plan_verify_keys, configs=s.kip441.configs(),
                reports_topic=s.reports_topic, plans_topic=s.plans_topic,
                plan_check_interval_ms=PLAN_CHECK_INTERVAL_MS,
            )  # fmt: skip
            fleet = stack.enter_context(StreamsFleet(config))
            fleet.produce(STREAMS_RECORDS, keys=STREAMS_RECORDS)
            for name in INSTANCES:
                fleet.start(name)
            self.streams[group] = fleet

    def processed_once(self) -> bool:
        """Every task of every live group processed by exactly one live instance."""
        if self.python is None:
            return False
        python = all(all_tasks_processed_once(self.python, g, PYTHON_TASKS) for g in PYTHON_GROUPS)
        return python and all(processed_once(f) for f in self.streams.values())

    def process_id(self, group_id: str, name: str) -> str:
        """The instance's persistent process id, fixed now if it never ran (so a plan can name it in advance)."""
        if group_id in self.streams:
            return self.streams[group_id].process_id(name)
        assert self.python is not None
        return self.python.process_id(group_id, name)

    def start_instance(self, group_id: str, name: str) -> None:
        if group_id in self.streams:
            self.streams[group_id].start(name)
        else:
            assert self.python is not None
            self.python.start(group_id, name)

    def announce(self, group_id: str, name: str) -> str:
        """An empty report for an instance about to join, so tonight's plan already gives it its share."""
        template = self._template(group_id)
        if group_id in self.streams:
            return self.streams[group_id].announce(name, template)
        process_id = self.process_id(group_id, name)
        report = {
            **template,
            "process_id": process_id,
            "member_id": "",
            "client_id": f"{group_id}-{process_id[:8]}",
            "generation": 0,
            "reported_at": int(time.time() * 1000),
            "active_tasks": [],
            "standby_tasks": [],
            "warmup_tasks": [],
            "task_offset_sums": {},
            "plan_id": None,
            "fallback_reason": None,
        }
        producer = Producer({"bootstrap.servers": self.bootstrap})
        producer.produce(self.settings.reports_topic, json.dumps(report).encode(), f"{group_id}/{process_id}".encode())
        if producer.flush(30):
            raise AnnounceError(f"the announcement of {group_id}/{process_id} was not delivered")
        return process_id

    def _template(self, group_id: str) -> dict[str, object]:
        reports = read_latest_by_key(self.bootstrap, self.settings.reports_topic)
        for key, value in reports.items():
            if value is not None and key.decode().startswith(f"{group_id}/"):
                template: dict[str, object] = json.loads(value)
                return template
        raise AnnounceError(f"no report of {group_id} to announce a new instance with")

    def converged(self, group_id: str, plan: ApprovedPlan) -> bool:
        """Every live instance of the group holds and processes exactly its target tasks, nothing moving."""
        if group_id in self.streams:
            return at_target(self.streams[group_id], plan.target)
        assert self.python is not None
        return converged(self.python, group_id, plan.target, plan.plan_id)
