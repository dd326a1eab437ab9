"""The restored-offsets reports members' restore listeners published, read back from the reports topic."""

from __future__ import annotations

from assignor.protocol.restored_offsets import RestoredOffsetsReport, is_restored_key
from assignor.runtime.kafka_io import read_latest_by_key


def restored_reports(bootstrap: str, topic: str, group_id: str) -> dict[str, RestoredOffsetsReport]:
    """process id -> the restored-offsets report of the group's member published last."""
    out = {}
    for key, value in read_latest_by_key(bootstrap, topic).items():
        text = key.decode("utf-8")
        if value is not None and text.startswith(f"{group_id}/") and is_restored_key(text):
            report = RestoredOffsetsReport.decode(text, value)
            out[report.process_id] = report
    return out


def restored_since(reports: dict[str, RestoredOffsetsReport], since_ms: int) -> int:
    """The offsets of the restores that began at or after ``since_ms``, summed over the members."""
    return sum(r.offsets for report in reports.values() for r in report.restores.values() if r.started_at >= since_ms)
