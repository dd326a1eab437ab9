"""Rotation and revocation on a real broker: the runtime leader honors plans of every trusted key until a signed
revocation published with `keys revoke` reaches the plans topic; then it drops the revoked key's plan, refuses its
new records, and keeps the revocation in its state directory (no redeploy, no restart)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Producer

from assignor import ClientState, GroupState, plan_group
from assignor.protocol.plan_keys import PlanSigner, VerifyKeys
from assignor.protocol.plans import ApprovedPlan, Verifier
from assignor.runtime.group_assignor import LeaderInputs, MemberView
from assignor.runtime.kafka_io import ChangelogEndOffsets, PlanSource
from assignor.runtime.state_dir import StateDirectory
from jobs.cli.main import main
from jobs.local.broker import EmbeddedBroker
from jobs.signing import read_passphrase, write_signing_key
from tests.integration.test_runtime_group import CONFIGS, END, TASKS, TOPOLOGY, running, settled, topics
from tests.integration.test_runtime_plan_order import PLANS, _all, _plans_topic
from tests.support.runtime_harness import Group, wait_for
from tests.support.signing import SIGNER as OLD


def _plan(plan_id: str) -> ApprovedPlan:
    planned = plan_group(
        GroupState([ClientState("p1"), ClientState("p2")], frozenset(TASKS), frozenset(), dict.fromkeys(TASKS, END)),
        CONFIGS,
    )
    now = int(time.time() * 1000)
    return ApprovedPlan(
        plan_id, "orders", "snap", now, now + 600_000, "alice", now, CONFIGS, planned.target,
        tuple(planned.move_order),
    )  # fmt: skip


def _produce(broker: EmbeddedBroker, value: dict[str, object]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(PLANS, key=b"orders", value=json.dumps(value).encode())
    assert producer.flush(10) == 0


def test_a_revoked_key_is_refused_by_a_running_leader_after_keys_revoke(
    broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topics(broker)
    _plans_topic(broker)
    phrase_file = tmp_path / "passphrase"
    phrase_file.write_bytes(b"a long enough passphrase\n")
    phrase_file.chmod(0o600)
    new_file, new = write_signing_key(tmp_path / "keys", "k-2027", read_passphrase(phrase_file))
    trusted = VerifyKeys({**OLD.verify_keys().keys, **new.verify_keys().keys})  # rotation: both, side by side
    state = StateDirectory(tmp_path / "leader-state")
    source = PlanSource(broker.bootstrap, PLANS)
    ends = ChangelogEndOffsets(broker.bootstrap)
    inputs = LeaderInputs(
        "orders", CONFIGS, Verifier(trusted), ends, source.records, lambda: int(time.time() * 1000),
        remembered_sequence=state.plan_sequence, remember_sequence=state.remember_plan_sequence,
        key_revocations=source.key_revocations, remembered_revoked_keys=state.revoked_keys,
        remember_revoked_keys=state.remember_revoked_keys,
    )  # fmt: skip
    now = int(time.time() * 1000)
    try:
        _produce(broker, _plan("plan-old").to_record(OLD, now))
        group = Group(broker.bootstrap, "orders", TOPOLOGY, inputs)
        for pid in ("p1", "p2"):
            group.add(running(MemberView(pid)))
        with group:
            wait_for(lambda: settled(group.members, 2), 60, "two members to settle")
            wait_for(lambda: _all(group, "plan-old", None), 30, "the old key's plan honored until it is revoked")
            for name, value in {
                "RBP_HOME": str(tmp_path / "home"),
                "RBP_PLAN_SIGNING_KEY_FILE": str(new_file),
                "RBP_PLAN_KEY_ID": new.key_id,
                "RBP_PLAN_SIGNING_PASSPHRASE_FILE": str(phrase_file),
                "RBP_PLAN_VERIFY_KEYS": trusted.render(),
            }.items():
                monkeypatch.setenv(name, value)
            assert main(["keys", "revoke", "--key-id", OLD.key_id, "--by", "security", "--bootstrap",
                         broker.bootstrap, "--reason", "the laptop was stolen"]) == 0  # fmt: skip
            group.members["p1"].view.request_rejoin()
            wait_for(lambda: _all(group, None, "revoked_key: "), 60, "the revoked key's plan dropped")
            assert state.revoked_keys() == {OLD.key_id}  # kept where a restart finds it
            _produce(broker, replace(_plan("plan-new"), created_at=now + 1).to_record(new, now + 1))
            group.members["p1"].view.request_rejoin()
            wait_for(lambda: _all(group, "plan-new", None), 60, "the new key's plan honored")
            # Whoever holds the stolen key signs a newer plan: it is refused, the verified plan stays.
            _produce(broker, replace(_plan("plan-stolen"), created_at=now + 2).to_record(OLD, now + 2))
            group.members["p1"].view.request_rejoin()
            wait_for(lambda: _all(group, "plan-new", "revoked_key: "), 60, "the stolen key's plan refused")
    finally:
        ends.close()


def test_keys_revoke_refuses_a_signing_key_the_groups_do_not_trust(
    broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file, signer = write_signing_key(tmp_path, "k-untrusted")
    monkeypatch.setenv("RBP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RBP_PLAN_SIGNING_KEY_FILE", str(key_file))
    monkeypatch.setenv("RBP_PLAN_KEY_ID", signer.key_id)
    monkeypatch.setenv("RBP_PLAN_VERIFY_KEYS", OLD.verify_keys().render())
    assert main(["keys", "revoke", "--key-id", OLD.key_id, "--bootstrap", broker.bootstrap]) == 2
    assert "not among RBP_PLAN_VERIFY_KEYS" in capsys.readouterr().err


def test_publish_refuses_to_sign_with_a_revoked_key(broker: EmbeddedBroker, tmp_path: Path) -> None:
    from assignor.protocol.key_revocation import KeyRevocation  # noqa: PLC0415
    from jobs.pipeline.plan_sequence import RevokedSigningKey, assign_sequences  # noqa: PLC0415

    _plans_topic(broker)
    revocation = KeyRevocation(OLD.key_id, 1, "security", "").to_record(OLD)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(PLANS, key=b"_rbp_key_revocation/" + OLD.key_id.encode(), value=json.dumps(revocation).encode())
    assert producer.flush(10) == 0
    properties = {"bootstrap.servers": broker.bootstrap}
    with pytest.raises(RevokedSigningKey, match="revoked"):
        assign_sequences(properties, PLANS, OLD.verify_keys(), ["orders"], 5, 30.0, OLD.key_id)
    other = PlanSigner.generate("k-other")
    keys = VerifyKeys({**OLD.verify_keys().keys, **other.verify_keys().keys})
    assert assign_sequences(properties, PLANS, keys, ["orders"], 5, 30.0, other.key_id) == {"orders": 5}


def test_a_reader_keeps_no_revocation_record_larger_than_a_revocation(broker: EmbeddedBroker) -> None:
    from assignor.protocol.key_revocation import MAX_REVOCATION_BYTES, KeyRevocation  # noqa: PLC0415

    _plans_topic(broker)
    real = json.dumps(KeyRevocation(OLD.key_id, 2, "security", "").to_record(OLD)).encode()
    huge = b"x" * (MAX_REVOCATION_BYTES + 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(PLANS, key=b"_rbp_key_revocation/huge", value=huge)
    producer.produce(PLANS, key=b"_rbp_key_revocation/" + OLD.key_id.encode(), value=real)
    assert producer.flush(10) == 0
    source = PlanSource(broker.bootstrap, PLANS)
    list(source.records("orders"))
    kept = source.key_revocations()
    assert real in kept and huge not in kept
