"""Each group is planned with its own KIP-441 settings: an explicit override, else what its members report, else
Kafka's default; a change versus the group's own is recorded, and unexplained unless an override asked for it."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from assignor import AssignmentConfigs, TaskId
from assignor.protocol.reported_settings import GroupProtocol, ReportedSettings
from assignor.protocol.state_report import StateReport
from assignor.runtime.group_assignor import settings_changes
from jobs.pipeline.group_settings import SettingSource, resolve
from jobs.pipeline.streams_groups import StreamsMember, group_reports
from schemas.kip441 import KIP441_NAMES, kip441_settings
from tests.support.streams_user_data import assignment_bytes, subscription_bytes

BOUNDS = kip441_settings()


def test_a_group_is_planned_with_the_settings_it_reports() -> None:
    planned = resolve({"num_standby_replicas": [1], "probing_rebalance_interval_ms": [600_000]}, {})
    assert planned.configs() == AssignmentConfigs(num_standby_replicas=1)
    assert planned.sources["num_standby_replicas"] is SettingSource.REPORTED
    assert planned.sources["acceptable_recovery_lag"] is SettingSource.DEFAULT  # unknown: Kafka's default
    assert planned.changes == () and planned.changes_text is None and planned.unexplained_text is None


def test_an_override_wins_and_is_recorded_as_an_explicit_change() -> None:
    planned = resolve({"num_standby_replicas": [1]}, {"num_standby_replicas": 0, "max_warmup_replicas": 2})
    assert planned.values["num_standby_replicas"] == 0
    assert planned.changes_text == "num_standby_replicas 1 -> 0 (override)"
    assert planned.unexplained_text is None  # explicit: flagged, not rejected
    # An override equal to the group's own, or over a value nobody knows, changes nothing anyone can name.
    assert planned.sources["max_warmup_replicas"] is SettingSource.OVERRIDE
    assert resolve({"num_standby_replicas": [0]}, {"num_standby_replicas": 0}).changes == ()


def test_members_that_disagree_get_the_safer_value_and_the_plan_is_flagged_unexplained() -> None:
    planned = resolve({"num_standby_replicas": [1, 0], "probing_rebalance_interval_ms": [60_000, 600_000]}, {})
    assert planned.values["num_standby_replicas"] == 1  # more standbys: no copy is dropped mid-rollout
    assert planned.values["probing_rebalance_interval_ms"] == 600_000
    assert planned.unexplained_text == (
        "num_standby_replicas 0,1 -> 1 (members disagree); "
        "probing_rebalance_interval_ms 60000,600000 -> 600000 (members disagree)"
    )
    settled = resolve({"num_standby_replicas": [1, 0]}, {"num_standby_replicas": 1})
    assert settled.unexplained_text is None and settled.changes_text == "num_standby_replicas 0,1 -> 1 (override)"


def test_a_reported_value_beyond_the_planning_bounds_is_bounded_and_never_silent() -> None:
    planned = resolve({"acceptable_recovery_lag": [2**63 - 1]}, {})
    assert planned.values["acceptable_recovery_lag"] == 2**53 - 1
    assert planned.unexplained_text == (
        f"acceptable_recovery_lag {2**63 - 1} -> {2**53 - 1} (beyond the planning bounds 0..{2**53 - 1})"
    )


@given(
    reported=st.fixed_dictionaries(
        {},
        optional={n: st.lists(st.integers(BOUNDS[n].minimum, 2**40), min_size=1, max_size=3) for n in KIP441_NAMES},
    ),
    overrides=st.fixed_dictionaries(
        {}, optional={n: st.integers(BOUNDS[n].minimum, BOUNDS[n].maximum) for n in KIP441_NAMES}
    ),
)
def test_resolution_rules(reported: dict[str, list[int]], overrides: dict[str, int]) -> None:
    planned = resolve(reported, overrides)
    planned.configs()  # always within the bounds
    changed = {c.name: c for c in planned.changes}
    for name in KIP441_NAMES:
        own = sorted(set(reported.get(name, [])))
        value = planned.values[name]
        if name in overrides:
            assert value == overrides[name] and planned.sources[name] is SettingSource.OVERRIDE
            assert (name in changed) == (bool(own) and own != [value])
            assert name not in changed or changed[name].explicit
        elif own:
            assert planned.sources[name] is SettingSource.REPORTED
            assert (name in changed) == (len(own) > 1 or own[0] > BOUNDS[name].maximum)
            assert name not in changed or not changed[name].explicit
            if len(own) == 1 and name not in changed:
                assert value == own[0]
        else:
            assert value == BOUNDS[name].default and name not in changed
    assert (planned.unexplained_text is None) == all(c.explicit for c in planned.changes)


def test_reported_settings_round_trip_and_unknown_stays_null() -> None:
    known = ReportedSettings.of(AssignmentConfigs(num_standby_replicas=2, rack_aware_assignment_tags=("zone",)))
    assert ReportedSettings.from_json(known.to_json()) == known
    assert ReportedSettings(num_standby_replicas=1).to_json() == {
        "acceptable_recovery_lag": None, "max_warmup_replicas": None, "num_standby_replicas": 1,
        "probing_rebalance_interval_ms": None, "rack_aware_assignment_tags": None,
    }  # fmt: skip


def _member(pid: uuid.UUID, index: int, actives: list[TaskId], standbys: list[TaskId]) -> StreamsMember:
    sums = {t: -2 for t in actives} | {t: 5 for t in standbys}
    return StreamsMember(
        group_id="app",
        member_id=f"m{index}",
        client_id=f"c{index}",
        client_host="/10.0.0.1",
        subscription_user_data=subscription_bytes(11, pid, offset_sums=sums),
        assignment_user_data=assignment_bytes(
            11, actives, {t: [("app-store-changelog", t.partition)] for t in standbys}
        )
        if actives or standbys
        else b"",
        assigned=tuple(("in", t.partition) for t in actives),
        generation=3,
    )


def _inferred(members: list[StreamsMember]) -> set[int | None]:
    read = group_reports(members, {"in": 3, "app-store-changelog": 3}, 1_000)
    reports = [StateReport.decode(k.decode(), v) for k, v in read.reports]
    assert {r.protocol for r in reports} == {GroupProtocol.CLASSIC}
    return {r.settings.num_standby_replicas if r.settings else -1 for r in reports}


def test_report_only_groups_infer_standbys_from_what_they_hold_and_leave_the_rest_unknown() -> None:
    p = [uuid.UUID(int=i + 1) for i in range(3)]
    t = [TaskId(0, i) for i in range(3)]
    one_each = [_member(p[i], i, [t[i]], [t[(i + 1) % 3]]) for i in range(3)]
    assert _inferred(one_each) == {1}  # every stateful task has one standby, fewer than processes - 1
    read = group_reports(one_each, {"in": 3, "app-store-changelog": 3}, 1_000)
    settings = StateReport.decode(read.reports[0][0].decode(), read.reports[0][1]).settings
    assert settings == ReportedSettings(num_standby_replicas=1)  # acceptable lag, warmups, interval: unknown
    # A warmup arrives as one more standby of one task: the fewest copies still tell the setting.
    warming = [_member(p[0], 0, [t[0]], [t[1], t[2]]), *one_each[1:]]
    assert _inferred(warming) == {1}
    none = [_member(p[i], i, [t[i]], []) for i in range(3)]
    assert _inferred(none) == {0}
    # While a member has no assignment (a rebalance), or with one process, nothing can be said.
    rebalancing = [*one_each[:2], _member(p[2], 2, [], [])]
    assert _inferred(rebalancing) == {None}
    alone = [_member(p[0], 0, t, [])]
    assert _inferred(alone) == {None}


def test_a_leader_honoring_a_plan_names_the_settings_it_uses_instead_of_the_groups_own() -> None:
    plan = AssignmentConfigs(num_standby_replicas=0, probing_rebalance_interval_ms=60_000)
    own = AssignmentConfigs(num_standby_replicas=1)
    assert settings_changes(plan, own) == "num_standby_replicas 1 -> 0, probing_rebalance_interval_ms 600000 -> 60000"
    assert settings_changes(own, own) == "" and settings_changes(None, own) == ""
