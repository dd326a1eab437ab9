"""Coverage-guided fuzzing with atheris of the decoders hostile input reaches first (tests/support/fuzz.py): a state
report at intake (also with fuzzed keys), a signed plan record at a group's leader, Kafka Streams' SubscriptionInfo
and AssignmentInfo, the Python runtime's user data. Each run starts from valid records and the inputs that once
broke a decoder; any exception other than the decoder's own refusal (with a reason) fails the run, and libFuzzer
prints the input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


TARGETS = [
    ("report", 20_000),
    ("report_keys", 5_000),  # keys are parsed too: task ids, subtopology ids, group and process ids
    ("plan", 20_000),
    ("subscription", 50_000),
    ("assignment", 50_000),
    ("user_data", 20_000),
]


@pytest.mark.parametrize(("target", "runs"), TARGETS)
def test_no_input_crashes_a_decoder(target: str, runs: int, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tests.support.fuzz", target, str(tmp_path / "corpus")]
    flags = [f"-runs={runs}", "-seed=20261123", "-max_len=65536", "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/"]
    done = subprocess.run([*command, *flags], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    crashes = sorted(p.name for p in tmp_path.glob("crash-*"))
    assert done.returncode == 0 and not crashes, f"{target}: {crashes}\n{done.stderr[-3000:]}"
    # libFuzzer may count one run more than asked (an input it replays when the corpus loads): at least ``runs``.
    done_runs = re.search(r"Done (\d+) runs", done.stderr)
    assert done_runs is not None and int(done_runs.group(1)) >= runs, done.stderr[-3000:]
