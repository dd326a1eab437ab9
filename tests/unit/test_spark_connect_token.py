"""Spark Connect's pre-shared token (`rebalance-planner spark-connect --token-file`): read and bounded before use,
never on the server's command line, and only with a loopback address the readiness check can send it to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobs.cli.main import _build_parser
from jobs.local.spark_connect import TOKEN_ENV, LocalSparkConnect, read_token
from jobs.settings import shown_remote

GOOD = "a1B2-c3_d4.e5~f6+g7h8"


def test_a_token_file_is_read_without_its_surrounding_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(f"  {GOOD}\n", encoding="ascii")
    assert read_token(path) == GOOD


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("short", "16 to 512 characters"),
        ("x" * 513, "16 to 512 characters"),
        ("a" * 20 + ";use_ssl=false", "16 to 512 characters"),  # would cut the sc:// URL's parameters
        ("a" * 20 + " b", "16 to 512 characters"),
        ("", "got 0 characters"),
    ],
)
def test_a_bad_token_is_refused_with_what_is_wrong(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "token"
    path.write_text(content, encoding="ascii")
    with pytest.raises(ValueError, match=why) as refused:
        read_token(path)
    assert content not in str(refused.value) or not content  # the token itself is never echoed


def test_a_missing_token_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"{tmp_path / 'absent'}: cannot read it"):
        read_token(tmp_path / "absent")


def test_the_token_is_never_on_the_servers_command_line(tmp_path: Path) -> None:
    server = LocalSparkConnect(port=15999, token=GOOD)
    try:
        command = server.command([tmp_path / "delta.jar"])
    finally:
        server.close()
    assert not any(GOOD in arg for arg in command)
    assert not any("authenticate.token" in arg for arg in command)
    assert TOKEN_ENV == "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # what Spark Connect reads the token from


def test_a_server_with_a_token_listens_where_its_readiness_check_can_send_it() -> None:
    for host in ("10.0.0.7", "0.0.0.0"):  # every interface would carry the token in plain gRPC
        with pytest.raises(ValueError, match=re.escape(f"loopback only, not '{host}'")):
            LocalSparkConnect(port=15999, host=host, token=GOOD)
    with pytest.raises(ValueError, match="16 to 512 characters"):
        LocalSparkConnect(port=15999, token="short")


def test_the_cli_takes_a_token_file() -> None:
    args = _build_parser().parse_args(["spark-connect", "--host", "127.0.0.1", "--token-file", "/run/secrets/t"])
    assert args.token_file == Path("/run/secrets/t")


def test_a_remote_is_shown_with_its_token_masked() -> None:
    assert shown_remote(f"sc://spark-connect:15002/;use_ssl=true;token={GOOD}") == (
        "sc://spark-connect:15002/;use_ssl=true;token=***"
    )
    assert shown_remote(f"sc://h:1/;token={GOOD};use_ssl=true") == "sc://h:1/;token=***;use_ssl=true"
    assert shown_remote("sc://localhost:15002") == "sc://localhost:15002"


def test_a_token_file_too_large_to_be_one_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    big = tmp_path / "token"
    big.write_bytes(b"a" * 10_000_000)
    with pytest.raises(ValueError, match="more than 4096 bytes, not a token"):
        read_token(big)
