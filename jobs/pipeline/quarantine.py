"""The quarantine table kept bounded: a cap per source a night (beyond it one summary row counts what was left
out), a record already quarantined by an earlier snapshot not stored again (by content hash), and long values cut
to their first 4 KiB with their length and hash kept. The rules are pure; ``stored_hashes`` is the one lake read."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake
from jobs.pipeline.intake import Quarantined

RAW_LIMIT_BYTES = 4096
KEY_LIMIT_CHARS = 512  # a report key is at most 249 + 1 + 249 characters; longer ones are hostile
REASON_LIMIT_CHARS = 2048  # a schema validator's message may quote the whole offending value
CAPPED = "quarantine_capped"  # reason code of a night's summary row for a source over its cap
CAP_SOURCE = "quarantine_cap"  # the summary row's source; its key names the capped source
DEFAULT_CAP_PER_SOURCE = 1000


@dataclass(frozen=True)
class QuarantineRow:
    """One row of the quarantine table, cut to its limits; ``content_hash`` is None for a summary row."""

    source: str
    key: str
    raw: str | None
    reason: str
    group_id: str | None
    raw_bytes: int | None
    content_hash: str | None


@dataclass(frozen=True)
class BoundedQuarantine:
    """A night's rows to store, and per source what was not stored: left out by the cap, or seen before."""

    rows: tuple[QuarantineRow, ...]
    dropped: Counter[str] = field(default_factory=Counter)
    repeated: Counter[str] = field(default_factory=Counter)


def content_hash(q: Quarantined) -> str:
    """SHA-256 (hex) of what makes an entry the same one again: its source, key, value (or, for a skipped group,
    which has none, its reason) and the rule it broke (the reason's code, not its detail)."""
    code = q.reason.split(":", 1)[0]
    content = q.raw if q.raw is not None else q.reason
    digest = hashlib.sha256()
    for part in (q.source, q.key, code, content):
        encoded = part.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)  # length-prefixed: no two splits collide
    return digest.hexdigest()


def _cut_utf8(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form fits ``limit`` bytes (never half a character)."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", "ignore")


def _cut_chars(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    # The full text's hash keeps two long keys that share a prefix distinct (the key is part of the table's key).
    suffix = f"... ({len(text)} {what}, sha256 {hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()})"
    return text[: limit - len(suffix)] + suffix


def stored_row(q: Quarantined, digest: str | None = None) -> QuarantineRow:
    """The row an entry is stored as: the value's first 4 KiB, its full length in bytes, its hash."""
    raw_bytes = None if q.raw is None else (q.raw_bytes or len(q.raw.encode("utf-8", "surrogatepass")))
    return QuarantineRow(
        source=q.source,
        key=_cut_chars(q.key, KEY_LIMIT_CHARS, "characters"),
        raw=None if q.raw is None else _cut_utf8(q.raw, RAW_LIMIT_BYTES),
        reason=_cut_chars(q.reason, REASON_LIMIT_CHARS, "characters"),
        group_id=None if q.group_id is None else _cut_chars(q.group_id, KEY_LIMIT_CHARS, "characters"),
        raw_bytes=raw_bytes,
        content_hash=digest or content_hash(q),
    )


def candidate_hashes(entries: Iterable[Quarantined]) -> set[str]:
    """The hashes to look up among earlier snapshots' rows: records only (a skipped group is a night's verdict,
    written every night it holds)."""
    return {content_hash(q) for q in entries if q.raw is not None}


def bound_quarantine(entries: Sequence[Quarantined], cap_per_source: int, seen: Collection[str]) -> BoundedQuarantine:
    """The rows to store for a night: records whose hash is in ``seen`` (stored by an earlier snapshot) are counted,
    not stored; per source at most ``cap_per_source`` rows (by key order), and one summary row per source that
    had more, saying how many were left out."""
    by_source: dict[str, list[tuple[Quarantined, str]]] = defaultdict(list)
    repeated: Counter[str] = Counter()
    tonight: set[str] = set()
    for q in entries:
        digest = content_hash(q)
        if q.raw is not None and (digest in seen or digest in tonight):
            repeated[q.source] += 1
            continue
        tonight.add(digest)
        by_source[q.source].append((q, digest))
    rows: list[QuarantineRow] = []
    dropped: Counter[str] = Counter()
    for source in sorted(by_source):
        kept = sorted(by_source[source], key=lambda entry: (entry[0].key, entry[1]))
        rows.extend(stored_row(q, digest) for q, digest in kept[:cap_per_source])
        if len(kept) > cap_per_source:
            dropped[source] = len(kept) - cap_per_source
            reason = (
                f"{CAPPED}: {dropped[source]} more quarantined {source} record(s) not stored tonight "
                f"(at most {cap_per_source} a source a night: RBP_QUARANTINE_CAP_PER_SOURCE)"
            )
            rows.append(QuarantineRow(CAP_SOURCE, source, None, reason, None, None, None))
    return BoundedQuarantine(tuple(rows), dropped, repeated)


def stored_hashes(lake: Lake, snapshot_id: str, hashes: Collection[str]) -> set[str]:
    """Which of ``hashes`` rows of snapshots other than ``snapshot_id`` already hold (a lookup of this night's
    candidates only, so the read follows tonight's quarantine, not the table's history)."""
    if not hashes or not lake.exists("quarantine"):
        return set()
    wanted = lake.spark.createDataFrame([(h,) for h in sorted(hashes)], schema="content_hash string")
    earlier = lake.read("quarantine").where(sf.col("snapshot_id") != snapshot_id).select("content_hash")
    return {row["content_hash"] for row in earlier.join(wanted, "content_hash", "inner").distinct().collect()}
