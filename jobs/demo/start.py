"""The demo's first phases: a fresh working directory, the settings and signing key, the broker (with our
broker-side assignor trusting that key), the product's topics, Airflow, the live groups and the report-only ones."""

from __future__ import annotations

import logging
import shutil
import socket
from contextlib import ExitStack
from pathlib import Path

from assignor.runtime.kafka_io import ChangelogEndOffsets
from jobs.demo.engine import DemoEngine
from jobs.demo.groups import simulated_groups, write_simulated_groups
from jobs.demo.live import LIVE_GROUPS, NEWCOMER, PARTITIONS, SCALED_OUT, STREAMS_GROUP, LiveGroups
from jobs.demo.progress import Progress
from jobs.local.airflow import LocalAirflow
from jobs.local.broker import BrokerAssignor, EmbeddedBroker
from jobs.polling import wait_until
from jobs.processes import free_port
from jobs.provisioning import ensure_product_topics, product_topics
from jobs.settings import Kip441Settings, Settings
from jobs.signing import write_signing_key

HOST = "127.0.0.1"
# Small enough that the newcomer must warm up, probing often enough that the groups converge within the demo.
KIP441 = Kip441Settings(
    acceptable_recovery_lag=100, max_warmup_replicas=2, num_standby_replicas=1, probing_rebalance_interval_ms=10_000
)
MIN_CHANGELOG = 300  # records per changelog partition before planning: well beyond the acceptable lag
# Observe may trigger a streams plan's next step this soon after the last one (the product's default is 30 s).
STEP_MIN_INTERVAL_MS = 5_000


def fresh_root(root: Path) -> Path:
    """The working directory, emptied; the demo's log goes there (the console shows progress lines only)."""
    root = root.resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    logging.basicConfig(level=logging.WARNING, filename=str(root / "demo.log"))
    logging.getLogger("jobs").setLevel(logging.WARNING)  # the progress lines say what happens
    return root


def demo_settings(root: Path, bootstrap: str, engine: DemoEngine) -> Settings:
    """The settings every part of the demo shares, with a signing key generated under ``root``."""
    key_file, signer = write_signing_key(root / "keys", "demo")
    return Settings(
        lake_root=root / "lake",
        kafka_bootstrap=bootstrap,
        spark_remote=engine.remote,
        plan_signing_key_file=key_file,
        # The key's own id: without it publish signs under the key's fingerprint, which no verify key names.
        plan_key_id=signer.key_id,
        plan_verify_keys=signer.verify_keys().render(),
        kip441=KIP441,
        step_min_interval_ms=STEP_MIN_INTERVAL_MS,
    )


def broker_address() -> str:
    """Where the demo's broker will listen: chosen before it starts, since its assignor must trust the demo's key,
    which the settings (naming the broker) generate."""
    return f"{HOST}:{free_port()}"


def start_broker(stack: ExitStack, root: Path, settings: Settings, say: Progress) -> str:
    """Apache Kafka (KRaft) for the whole demo, with our broker-side streams assignor verifying with the demo's key;
    its bootstrap."""
    port = int(str(settings.kafka_bootstrap).rsplit(":", 1)[1])
    assignor = BrokerAssignor.built(settings.plan_verify_keys, settings.plans_topic)
    broker = stack.enter_context(EmbeddedBroker(port=port, data_dir=root / "kafka", host=HOST, assignor=assignor))
    shown = "our broker-side assignor installed" if assignor is not None else "[yellow]without our assignor[/yellow]"
    say(f"Apache Kafka (KRaft) on [bold]{broker.bootstrap}[/bold] ({shown}), data in {broker.data_dir}")
    return broker.bootstrap


def setup_topics(settings: Settings, say: Progress) -> None:
    """The reports and plans topics, made as `rebalance-planner setup` makes them (no authorizer here: no ACLs)."""
    properties = settings.kafka_properties(str(settings.kafka_bootstrap))
    done = ensure_product_topics(properties, product_topics(settings.reports_topic, settings.plans_topic))
    say("topics " + ", ".join(f"{t.name} {t.action}" for t in done) + " (as `rebalance-planner setup` does)")


def start_airflow(stack: ExitStack, root: Path, port: int, settings: Settings, say: Progress) -> LocalAirflow:
    """Airflow standalone, starting in the background while the fleet warms up."""
    airflow = LocalAirflow(root / "airflow", port=port if free(port) else free_port(), extra_env=airflow_env(settings))
    stack.callback(airflow.stop)
    airflow.launch("standalone")
    say(f"Airflow standalone starting on {airflow.url} (log {airflow.home / 'standalone.log'})")
    return airflow


def free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((HOST, port)) != 0


def airflow_env(settings: Settings) -> dict[str, str | None]:
    """The settings Airflow's tasks read, as environment variables (None: unset, not inherited from the demo's)."""
    return {
        "SPARK_REMOTE": settings.spark_remote or None,
        "RBP_LAKE_ROOT": str(settings.lake_root),
        "RBP_KAFKA_BOOTSTRAP": str(settings.kafka_bootstrap),
        "RBP_PLAN_SIGNING_KEY_FILE": str(settings.plan_signing_key_file),
        "RBP_PLAN_KEY_ID": str(settings.plan_key_id),
        "RBP_PLAN_VERIFY_KEYS": settings.plan_verify_keys,
        "RBP_REPORTS_TOPIC": settings.reports_topic,
        "RBP_PLANS_TOPIC": settings.plans_topic,
        "RBP_KIP441": settings.kip441.model_dump_json(),
        "RBP_STEP_MIN_INTERVAL_MS": str(settings.step_min_interval_ms),
        "RBP_PLANNING_SCHEDULE": "",  # the demo triggers its runs
        "RBP_OBSERVE_SCHEDULE": "",
        "RBP_PLANNER_PROCESSES": "2",
    }


def start_fleet(stack: ExitStack, root: Path, settings: Settings, say: Progress) -> LiveGroups:
    """The live groups' instance processes, with input on their source topics."""
    live = LiveGroups(settings, root / "fleet")
    live.start(stack)
    classic = ", ".join(g for g in LIVE_GROUPS if g != STREAMS_GROUP)
    say(f"live groups: {classic} (Kafka Streams: reference-app JVMs with the plugin, 3 instances each) and "
        f"{STREAMS_GROUP} (the streams protocol, 2 instances: the broker assigns it); input written")  # fmt: skip
    return live


def changelogs_filled(ends: ChangelogEndOffsets) -> bool:
    """A live group's changelog is <group>-counts-changelog (the reference app's store is "counts")."""
    parts = [(f"{g}-counts-changelog", p) for g in LIVE_GROUPS for p in range(PARTITIONS)]
    return min(ends(parts).values()) >= MIN_CHANGELOG


def seed_groups(
    stack: ExitStack, live: LiveGroups, settings: Settings, simulated: int, timeout_s: float, say: Progress
) -> None:
    """Report-only groups beside the live ones, live state worth moving, and the scale-out announced for tonight."""
    bootstrap = str(settings.kafka_bootstrap)
    groups = simulated_groups(simulated, configs=settings.kip441.configs())  # they run the demo's settings
    written = write_simulated_groups(bootstrap, settings.reports_topic, groups)
    say(f"{len(groups)} report-only simulated groups written ({written:,} records)")

    ends = ChangelogEndOffsets(bootstrap)
    stack.callback(ends.close)
    wait_until(live.processed_once, timeout_s, "the live groups to settle")
    say("live groups settled: every task processed by exactly one instance")
    wait_until(lambda: changelogs_filled(ends), timeout_s, "the live changelogs to fill")
    say(f"live state built: every changelog partition holds >= {MIN_CHANGELOG} records")

    newcomer = live.announce(SCALED_OUT, NEWCOMER)
    say(f"scale-out announced: {SCALED_OUT}/{NEWCOMER} (process {newcomer[:8]}) joins after the approval")
