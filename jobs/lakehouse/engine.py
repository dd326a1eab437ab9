"""The Spark session every stage receives: the embedded Sail engine, or a Spark Connect server when given."""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from jobs.processes import without_huge_pages
from jobs.settings import shown_remote

log = logging.getLogger(__name__)

# Sail ends a session idle for 15 minutes by default, and a pyspark client does not keep it alive; our sessions live
# as long as a stage or a test session and may wait longer than that between queries (a human approval, a slow
# broker test), so the embedded engine keeps them for a day.
SAIL_IDLE_SESSION_TIMEOUT_S = 86_400
SAIL_LOG_FILTER = "info,sail_plan::resolver::query::misc=error"
# Rows per record batch in Sail's operators (its default is 8,192). The stages join and aggregate millions of
# narrow rows (a fleet's plan_assignments): in alternated runs at 10,000 groups, fewer and larger batches took
# ~1.5 CPU-s off the plan stage's engine and ~0.8 s off validate alone (docs/performance.md, "Larger record
# batches"); 65,536 and up were no better.
SAIL_BATCH_ROWS = 32_768


# Sessions on a Sail server this process runs: Python UDFs of their queries run in this process, under its GIL.
_embedded: weakref.WeakSet[SparkSession] = weakref.WeakSet()


# Stopped sessions, kept referenced for the life of the process. A pyspark Connect session's __del__ shuts down the
# release thread pool that every session shares and waits for it; when the cycle collector runs that __del__ on an
# embedded Sail engine's UDF thread while another query waits on the same pool, neither finishes (seen as a hang in
# test_pipeline_plan_calls). Keeping them alive means __del__ runs only at exit; a process stops a handful at most.
_stopped: list[SparkSession] = []


def embedded(session: SparkSession) -> bool:
    """Whether ``session`` runs on the Sail engine inside this process (spark_session without a remote)."""
    return session in _embedded


class EngineError(RuntimeError):
    """The Spark engine could not be started or reached."""


@contextmanager
def as_active(session: SparkSession) -> Iterator[SparkSession]:
    """Make ``session`` this thread's active Spark Connect session for a while.

    Libraries that find their session with ``SparkSession.builder.getOrCreate()`` (Great Expectations does) get
    the first session the process created, which is the wrong server when a process holds two (Sail and Apache
    Spark in one test session); pyspark has no public setter for the active Connect session.
    """
    slot = type(session)._active_session  # type: ignore[attr-defined]
    previous = getattr(slot, "session", None)
    slot.session = session
    try:
        yield session
    finally:
        slot.session = previous


@contextmanager
def spark_session(remote: str | None, *, idle_timeout_s: int = SAIL_IDLE_SESSION_TIMEOUT_S) -> Iterator[SparkSession]:
    """A Spark Connect session: ``remote`` (``sc://host:port``) when given, else Sail started in this process."""
    server = None
    if remote:
        url = remote
    else:
        # Sail reads its configuration from the environment when the server is built, and from nowhere else.
        os.environ["SAIL_SPARK__SESSION_TIMEOUT_SECS"] = str(idle_timeout_s)
        # Sail takes join hints as no-ops and warns once per hint per query (dozens a validate, from the
        # sort-merge hints Apache Spark needs); its other logs stay. An operator's RUST_LOG wins.
        os.environ.setdefault("RUST_LOG", SAIL_LOG_FILTER)
        os.environ.setdefault("SAIL_EXECUTION__BATCH_SIZE", str(SAIL_BATCH_ROWS))  # an operator's value wins
        # Sail's allocator asks the kernel for huge pages, and the kernel zeroes (and may compact memory for) a
        # whole 2 MiB page on first touch, again each time the allocator has handed one back: 13 % of validate's
        # CPU at 10,000 groups, and about a fifth of the engine's CPU in lags and plan (docs/performance.md,
        # "Huge pages, and held tasks as lists"). Off for this process and the planner workers it starts; a kernel
        # that refuses costs only speed.
        if not without_huge_pages():
            log.info("transparent huge pages stay on for the embedded engine: the kernel refused to turn them off")
        from pysail.spark import SparkConnectServer  # noqa: PLC0415 (planner workers import this module, never Sail)

        server = SparkConnectServer(port=0)
        server.start(background=True)
        address = server.listening_address
        if address is None:
            raise EngineError("the embedded Sail engine did not start listening")
        url = f"sc://localhost:{address[1]}"
    log.info("Spark Connect session on %s (%s)", shown_remote(url), "embedded Sail" if server else "SPARK_REMOTE")
    # create(), not getOrCreate(): a process may hold several sessions (e.g. Sail and a JVM Spark in tests).
    session = SparkSession.builder.remote(url).create()
    if server is not None:
        _embedded.add(session)
    try:
        yield session
    finally:
        session.stop()
        _stopped.append(session)
        if server is not None:
            server.stop()
