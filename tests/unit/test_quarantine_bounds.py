"""The quarantine stays bounded whatever arrives: a cap per source a night with one summary row for the rest, a
record stored by an earlier snapshot not stored again, values cut to 4 KiB with their length and hash kept."""

from __future__ import annotations

import hashlib
import json

from jobs.lakehouse.tables import table_schema
from jobs.pipeline.broker_reads import BrokerState
from jobs.pipeline.extract import bronze_rows
from jobs.pipeline.intake import Intake, Quarantined, parse_report
from jobs.pipeline.quarantine import (
    CAP_SOURCE,
    CAPPED,
    KEY_LIMIT_CHARS,
    RAW_LIMIT_BYTES,
    bound_quarantine,
    candidate_hashes,
    content_hash,
    stored_row,
)


def _bad(key: str, raw: str = "{not json", source: str = "reports") -> Quarantined:
    return Quarantined(source, key, raw, "malformed_json: Expecting property name", "g")


def test_a_source_over_its_cap_stores_the_cap_and_one_row_counting_the_rest() -> None:
    flood = [_bad(f"g/p{i:05d}", f"{{bad {i}") for i in range(2_500)]
    few = [
        Quarantined("group", f"h{i}", None, "group_skipped: 2 different topologies reported", f"h{i}") for i in range(3)
    ]

    bounded = bound_quarantine(flood + few, cap_per_source=1_000, seen=set())

    stored = [r for r in bounded.rows if r.source == "reports"]
    assert [r.key for r in stored] == [f"g/p{i:05d}" for i in range(1_000)]  # the first by key: the same every run
    (summary,) = [r for r in bounded.rows if r.source == CAP_SOURCE]
    assert summary.key == "reports" and summary.reason.startswith(f"{CAPPED}: 1500 more quarantined reports record(s)")
    assert summary.content_hash is None and summary.raw is None
    assert [r.key for r in bounded.rows if r.source == "group"] == ["h0", "h1", "h2"]
    assert bounded.dropped == {"reports": 1_500} and not bounded.repeated
    assert len({(r.source, r.key) for r in bounded.rows}) == len(bounded.rows)  # the table's key stays unique


def test_a_record_an_earlier_snapshot_stored_is_counted_not_stored_again() -> None:
    old, new = _bad("g/p1"), _bad("g/p2", "{also bad")
    skipped = Quarantined("group", "h", None, "group_skipped: topic(s) h-in0 not found on the broker", "h")

    bounded = bound_quarantine([old, new, skipped], cap_per_source=10, seen={content_hash(old), content_hash(skipped)})

    assert [(r.source, r.key) for r in bounded.rows] == [("group", "h"), ("reports", "g/p2")]  # a group: every night
    assert bounded.repeated == {"reports": 1}
    assert candidate_hashes([old, new, skipped]) == {content_hash(old), content_hash(new)}


def test_the_hash_is_the_content_and_the_rule_not_the_detail() -> None:
    base = _bad("g/p1")
    same_rule = Quarantined("reports", "g/p1", base.raw, "malformed_json: another detail", "g")
    other_rule = Quarantined("reports", "g/p1", base.raw, "schema_violation: at capacity", "g")
    other_key = _bad("g/p2")
    assert content_hash(same_rule) == content_hash(base)
    assert len({content_hash(base), content_hash(other_rule), content_hash(other_key)}) == 3


def test_long_values_are_cut_to_4_kib_keeping_length_and_hash() -> None:
    raw = "é" * 600_000  # two bytes a character: a cut must not split one
    q = Quarantined("reports", "g/p1", raw, "schema_violation: " + "x" * 1_000_000, "g")

    row = stored_row(q)

    assert row.raw is not None and raw.startswith(row.raw)
    assert RAW_LIMIT_BYTES - 1 <= len(row.raw.encode()) <= RAW_LIMIT_BYTES
    assert row.raw_bytes == 1_200_000 and row.content_hash == content_hash(q)
    assert len(row.reason) <= 2048 and row.reason.startswith("schema_violation: xxx")


def test_long_keys_are_cut_but_stay_distinct() -> None:
    a, b = _bad("k" * 100_000 + "a"), _bad("k" * 100_000 + "b")
    rows = bound_quarantine([a, b], cap_per_source=10, seen=set()).rows
    assert all(len(r.key) <= KEY_LIMIT_CHARS for r in rows)
    assert len({r.key for r in rows}) == 2
    assert hashlib.sha256(a.key.encode()).hexdigest() in rows[0].key


def test_the_length_of_a_value_that_is_not_utf8_is_its_length_in_bytes() -> None:
    outcome = parse_report(b"g/p1", b"\xff\xfe\xfd")
    assert isinstance(outcome, Quarantined)
    assert stored_row(outcome).raw_bytes == 3


def test_bronze_quarantine_rows_have_the_table_schema_columns() -> None:
    intake = Intake(quarantine=[_bad("g/p1", json.dumps({"x": "y" * 10_000}))])
    (row,) = bronze_rows("s1", 1, intake, BrokerState({}, {}, {}))["quarantine"]
    values = dict(zip(table_schema("quarantine").column_names, row, strict=True))
    assert values["raw_bytes"] == len(json.dumps({"x": "y" * 10_000})) and len(values["raw"]) == RAW_LIMIT_BYTES
    assert values["content_hash"] == content_hash(intake.quarantine[0])
