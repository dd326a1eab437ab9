"""Key revocation and the signing key service: the shared vectors, encrypted keys, and the `keys` commands."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from assignor.protocol.key_revocation import KeyRevocation, read_revocation, topic_key
from assignor.protocol.plan_keys import PlanKeyError, VerifyKeys
from assignor.protocol.plan_ledger import PlanLedger
from assignor.protocol.plans import PlanRejected, Verifier
from assignor.runtime.state_dir import MAX_REVOKED_KEYS, read_revoked_keys, remember_revoked_keys
from jobs.cli.main import main
from jobs.settings import Settings
from jobs.signing import FileKeyService, read_passphrase, write_signing_key
from schemas import read_json
from tests.support.signing import SIGNER
from tests.support.vectors import VECTORS, key_revocation_vectors

CASES = json.loads((VECTORS / "key_revocation_cases.json").read_text(encoding="utf-8"))
KEYS = VerifyKeys.parse(",".join(f"{k}={v}" for k, v in CASES["keys"].items()))


def test_the_committed_revocation_vectors_are_what_the_rules_produce() -> None:
    assert key_revocation_vectors() == CASES


@pytest.mark.parametrize("case", CASES["revocations"], ids=lambda c: c["name"])
def test_revocation_record(case: dict[str, Any]) -> None:
    value = base64.b64decode(case["record_b64"])
    got: tuple[str | None, str | None]
    try:
        got = (read_revocation(value, KEYS).revoked_key_id, None)
    except PlanRejected as why:
        got = (None, str(why.code))
    assert got == (case["revoked_key_id"], case["reason_code"])
    if case["revoked_key_id"] is not None:  # what verifies also matches the JSON schema
        jsonschema.validate(json.loads(value), read_json("key_revocation.schema.json"))


@pytest.mark.parametrize("case", CASES["ledger_cases"], ids=lambda c: c["name"])
def test_ledger_with_revocations(case: dict[str, Any]) -> None:
    now = CASES["now_ms"]
    verifier, ledger, revoked = Verifier(KEYS, CASES["clock_skew_ms"]), PlanLedger(case["group_id"]), frozenset[str]()
    for event in case["events"]:
        if "record" in event:
            ledger = ledger.offer(base64.b64decode(event["record"]), verifier, now)
            continue
        try:
            revoked |= {read_revocation(base64.b64decode(event["revocation"]), KEYS).revoked_key_id}
        except PlanRejected:
            continue
        verifier, ledger = verifier.revoking(revoked), ledger.revoke(revoked)
    choice = ledger.recheck(verifier, now).choice(now)
    got = {
        "plan_id": None if choice.plan is None else choice.plan.plan_id,
        "reason_code": None if choice.reason is None else str(choice.reason.code),
        "highest_sequence": choice.sequence,
        "revoked": sorted(revoked),
    }
    assert got == case["expected"]


def test_the_vectors_cover_rotation_revocation_and_forgery() -> None:
    codes = {c["reason_code"] for c in CASES["revocations"]}
    assert {None, "bad_signature", "unknown_key", "malformed", "unsupported_version"} <= codes
    assert any(c["expected"]["reason_code"] == "revoked_key" and c["expected"]["plan_id"] is None
               for c in CASES["ledger_cases"])  # fmt: skip


def test_revocations_sit_under_their_own_topic_key() -> None:
    assert topic_key("k1") == b"_rbp_key_revocation/k1"
    with pytest.raises(ValueError, match="key id"):
        KeyRevocation("bad id", 0, "me", "").to_record(SIGNER)


def _passphrase(tmp_path: Path, text: bytes = b"correct horse battery staple\n", mode: int = 0o600) -> Path:
    path = tmp_path / "passphrase"
    path.write_bytes(text)
    path.chmod(mode)
    return path


def test_an_encrypted_key_signs_only_with_its_passphrase(tmp_path: Path) -> None:
    phrase = read_passphrase(_passphrase(tmp_path))
    path, signer = write_signing_key(tmp_path / "keys", "k2026", phrase)
    assert b"ENCRYPTED PRIVATE KEY" in path.read_bytes()
    assert path.stat().st_mode & 0o777 == 0o600
    service = FileKeyService.open(path, "k2026", phrase, require_encrypted=True)
    assert service.public_keys().render() == signer.verify_keys().render()
    assert signer.verify_keys().verifies("k2026", service.sign("k2026", b"m"), b"m")
    with pytest.raises(PlanKeyError, match="passphrase is needed"):
        FileKeyService.open(path, None, None, require_encrypted=False)
    with pytest.raises(PlanKeyError, match="passphrase is wrong"):
        FileKeyService.open(path, None, b"not the passphrase", require_encrypted=False)
    with pytest.raises(PlanKeyError, match="no signing key 'other'"):
        service.sign("other", b"m")


def test_passphrase_files_must_be_private_and_long_enough(tmp_path: Path) -> None:
    with pytest.raises(PlanKeyError, match="readable by others"):
        read_passphrase(_passphrase(tmp_path, mode=0o644))
    with pytest.raises(PlanKeyError, match="shorter than"):
        read_passphrase(_passphrase(tmp_path, b"short\n"))


def test_production_mode_refuses_a_key_not_encrypted_at_rest(tmp_path: Path) -> None:
    path, _ = write_signing_key(tmp_path, "plain")
    with pytest.raises(PlanKeyError, match="not encrypted"):
        Settings(home=tmp_path, plan_signing_key_file=path, production=True, approvers=("alice",)).plan_signer()
    signer = Settings(home=tmp_path, plan_signing_key_file=path, plan_key_id="plain").plan_signer()
    assert signer.key_id == "plain"  # allowed outside production (with a warning)


def test_settings_sign_through_the_file_key_service(tmp_path: Path) -> None:
    phrase_file = _passphrase(tmp_path)
    path, key = write_signing_key(tmp_path / "keys", "enc", read_passphrase(phrase_file))
    settings = Settings(home=tmp_path, plan_signing_key_file=path, plan_signing_passphrase_file=phrase_file)
    signer = settings.plan_signer()
    assert key.verify_keys().verifies("enc", bytes.fromhex(signer.sign(b"plan")), b"plan")


def test_keys_generate_rotate_and_public_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("RBP_HOME", str(tmp_path))
    phrase = _passphrase(tmp_path)
    keys = tmp_path / "keys"
    assert main(["keys", "generate", "--dir", str(keys), "--key-id", "k1", "--passphrase-file", str(phrase)]) == 0
    first = capsys.readouterr().out
    assert "encrypted" in first and f"RBP_PLAN_SIGNING_PASSPHRASE_FILE={phrase}" in first
    old_verify = next(w for w in first.split() if w.startswith("RBP_PLAN_VERIFY_KEYS=")).split("=", 1)[1]
    monkeypatch.setenv("RBP_PLAN_VERIFY_KEYS", old_verify)
    assert main(["keys", "rotate", "--dir", str(keys), "--key-id", "k2", "--passphrase-file", str(phrase)]) == 0
    rotated = capsys.readouterr().out
    both = VerifyKeys.parse(next(w for w in rotated.split() if w.startswith("RBP_PLAN_VERIFY_KEYS=")).split("=", 1)[1])
    assert set(both.keys) == {"k1", "k2"}  # the new key beside the old: old plans stay honored
    assert main(["keys", "rotate", "--dir", str(keys), "--key-id", "k1"]) == 2  # never overwritten
    assert main(["keys", "rotate", "--dir", str(tmp_path / "elsewhere"), "--key-id", "k1"]) == 2  # a trusted id
    assert "already among RBP_PLAN_VERIFY_KEYS" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere" / "k1.pem").exists()  # refused before a key was written
    assert main(["keys", "public", str(keys / "k2.pem"), "--key-id", "k2", "--passphrase-file", str(phrase)]) == 0
    assert both.render().split(",")[1] in capsys.readouterr().out.replace("\n", "")
    assert main(["keys", "public", str(keys / "k2.pem")]) == 2  # encrypted: the passphrase is needed
    assert "passphrase is needed" in capsys.readouterr().err
    assert sorted(os.listdir(keys)) == ["k1.pem", "k2.pem"]


def test_the_most_revoked_keys_the_state_file_keeps_read_back(tmp_path: Path) -> None:
    longest = frozenset(f"{n:04d}".ljust(64, "k") for n in range(MAX_REVOKED_KEYS))
    remember_revoked_keys(tmp_path, longest)
    assert read_revoked_keys(tmp_path) == longest  # what it may write, it can read again
    with pytest.raises(ValueError, match=f"at most {MAX_REVOKED_KEYS}"):
        remember_revoked_keys(tmp_path, frozenset({"one-more"}))
    assert read_revoked_keys(tmp_path) == longest
