"""The Spark session every stage receives: the embedded Sail engine, or a Spark Connect server when given."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from pysail.spark import SparkConnectServer
from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class EngineError(RuntimeError):
    """The Spark engine could not be started or reached."""


@contextmanager
def spark_session(remote: str | None) -> Iterator[SparkSession]:
    """A Spark Connect session: ``remote`` (``sc://host:port``) when given, else Sail started in this process."""
    if remote:
        log.info("connecting to Spark Connect server %s", remote)
        session = SparkSession.builder.remote(remote).getOrCreate()
        try:
            yield session
        finally:
            session.stop()
        return
    server = SparkConnectServer(port=0)
    server.start(background=True)
    address = server.listening_address
    if address is None:
        raise EngineError("the embedded Sail engine did not start listening")
    url = f"sc://localhost:{address[1]}"
    log.info("embedded Sail engine listening on %s", url)
    # create(), not getOrCreate(): a process may hold several sessions (e.g. Sail and a JVM Spark in tests).
    session = SparkSession.builder.remote(url).create()
    try:
        yield session
    finally:
        session.stop()
        server.stop()
