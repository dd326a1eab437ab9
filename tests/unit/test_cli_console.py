"""Output that goes to a pipe, a file or CI keeps every id whole (rich would cut tables at 80 columns there)."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from jobs.cli.console import cli_console
from jobs.cli.main import main

pytestmark = pytest.mark.unit


def test_a_table_printed_to_a_pipe_keeps_long_ids_and_statuses_whole() -> None:
    out = io.StringIO()
    console = cli_console(out)
    assert not console.is_terminal
    group = "sim-" + "0123456789" * 12
    table = Table("group", "status", "plan")
    table.add_row(group, "VALIDATED", f"20261126T142240Z-4f2a9c/{group}")
    console.print(table)
    text = out.getvalue()
    assert group in text and "VALIDATED" in text and f"20261126T142240Z-4f2a9c/{group}" in text
    assert "…" not in text


def test_a_long_line_printed_to_a_pipe_is_not_wrapped() -> None:
    out = io.StringIO()
    line = "withdrawal of orders's plan " + "x" * 200 + " published"
    cli_console(out).print(line)
    assert out.getvalue() == line + "\n"


def test_status_with_no_broker_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RBP_KAFKA_TIMEOUT_S", "1")  # the entry point's settings: how long librdkafka keeps trying

    # Port 1 on the loopback refuses at once: the unreachable broker is real, not mocked.
    code = main(["status", "--bootstrap", "127.0.0.1:1", "--no-lake"])
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("%")]  # librdkafka's own
    assert code == 1
    assert err == [
        "rebalance-planner status: the Kafka cluster at 127.0.0.1:1 could not be read: Failed to get metadata: "
        "Local: Broker transport failure"
    ]
