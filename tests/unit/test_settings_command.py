"""`rebalance-planner settings` and the top-level help: every RBP_ setting findable, secrets never printed."""

from __future__ import annotations

import json

import pytest

from jobs.cli.main import main


def test_the_help_names_the_settings_command_and_the_data_home(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "`rebalance-planner settings`" in text and "RBP_HOME" in text and "RBP_LAKE_ROOT" in text
    assert "setup" in text and "status" in text


def test_settings_lists_values_whole_and_masks_secrets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = "/srv/" + "rebalance-planner-data-home-with-a-long-name" * 2
    monkeypatch.setenv("RBP_HOME", home)
    monkeypatch.delenv("RBP_LAKE_ROOT", raising=False)
    monkeypatch.setenv("RBP_KAFKA_CONFIG", json.dumps({"sasl.username": "rbp", "sasl.password": "s3cret-pw"}))
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert f"{home}/lake" in out  # whole, though longer than any terminal (stdout is no terminal here)
    assert "s3cret-pw" not in out and "****" in out
    for name in ("RBP_HOME", "RBP_LAKE_ROOT", "RBP_JVM_DIR", "RBP_KAFKA_BOOTSTRAP", "SPARK_REMOTE", "RBP_APPROVERS"):
        assert name in out
