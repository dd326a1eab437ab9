"""The planning DAG's run parameters: the group filter, the drains, the KIP-441 settings and the approval timeout.

Read when the DAG file is parsed, so it imports only Airflow's Param and the settings (no Spark, no assignor).
"""

from __future__ import annotations

from airflow.sdk import Param

from schemas.kip441 import SettingBounds, kip441_settings

# What every integer column and the JVM's long hold: a run's params are outside input too.
_INT64_MAX = (1 << 63) - 1
_ID_CHARS = 249  # a group or process id (docs/formats.md)
_APPROVAL_TIMEOUT_MAX_S = 366 * 24 * 3600


def _kip441_param(bounds: SettingBounds) -> Param:
    """A fleet-wide override for this run, bounded as schemas/kip441_settings.json says."""
    return Param(
        None,
        type=["null", "integer"],
        minimum=bounds.minimum,
        maximum=bounds.maximum,
        description=f"{bounds.description}: an explicit override for every group of this run (a group's own "
        f"RBP_KIP441_OVERRIDES entry still wins); empty: each group's own setting",
    )


PLANNING_PARAMS = {
    "groups": Param(
        [],
        type="array",
        items={"type": "string", "minLength": 1, "maxLength": _ID_CHARS},
        description="groups to plan for approval: ids or shell patterns (orders-*); empty: every group",
    ),
    "drain": Param(
        [],
        type="array",
        items={"type": "string", "pattern": "^.+/[^/]+$", "maxLength": 2 * _ID_CHARS + 1},
        description="instances to drain before they are stopped, as group/process: their tasks warm up elsewhere "
        "and move; the report says when each is safe to stop",
    ),
    # One param per KIP-441 setting, named as the setting: tasks.runtime adds them to the fleet-wide overrides.
    **{name: _kip441_param(bounds) for name, bounds in kip441_settings().items()},
    "approval_timeout_s": Param(
        None,
        type=["null", "number"],
        exclusiveMinimum=0,
        maximum=_APPROVAL_TIMEOUT_MAX_S,
        description="reject everything when nobody decides within this many seconds; empty: RBP_APPROVAL_TIMEOUT_S",
    ),
}
