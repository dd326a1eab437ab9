"""The KIP-441 baseline: Kafka Streams' HighAvailabilityTaskAssignor (rack awareness off)."""

from __future__ import annotations

from assignor.assignment import GroupAssignment
from assignor.balance import deal_actives
from assignor.configs import AssignmentConfigs
from assignor.lags import LagIndex
from assignor.movement import WarmupBudget, move_actives, move_standbys
from assignor.placement import Placement
from assignor.standby import place_standbys
from assignor.state import GroupState


def assign_high_availability(group: GroupState, configs: AssignmentConfigs) -> GroupAssignment:
    """Balanced target by capacity, standbys, then warmups for moves to clients that are not caught up."""
    stateful = sorted(group.stateful_tasks)
    placement = Placement(group)
    lags = LagIndex.of(group, configs)
    deal_actives(placement, stateful)
    place_standbys(placement, stateful, configs.num_standby_replicas, configs.rack_aware_assignment_tags)
    budget = WarmupBudget(configs.max_warmup_replicas)
    active_moves = move_actives(placement, lags, stateful, budget)
    standby_moves = move_standbys(placement, lags, budget)
    deal_actives(placement, sorted(group.stateless_tasks))
    return placement.freeze(probing_rebalance_needed=active_moves + standby_moves > 0)


def settled_assignment(group: GroupState, configs: AssignmentConfigs) -> GroupAssignment:
    """The only assignment assign_high_availability returns without asking for a probing rebalance.

    Its balanced placement (actives dealt by capacity, standbys, stateless actives) depends on the clients,
    their capacities and tags and the tasks, never on lags or history; movements only change it while one is
    needed, and then the assignor asks for a probing rebalance. So where KIP-441 settles is known without
    replaying its rounds.
    """
    stateful = sorted(group.stateful_tasks)
    placement = Placement(group)
    deal_actives(placement, stateful)
    place_standbys(placement, stateful, configs.num_standby_replicas, configs.rack_aware_assignment_tags)
    deal_actives(placement, sorted(group.stateless_tasks))
    return placement.freeze(probing_rebalance_needed=False)
